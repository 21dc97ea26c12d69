/**
 * Client connections through raw sockets: pipelined requests are handled one at a time and in
 * order, nothing read after an answer that closes is handled, and open connections are capped.
 */
import t from "tap";
import { MAX_WAITING } from "../src/http/connections.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { exchange } from "./helpers/pipeline.js";
import { startSlowUpstream, startUpstream } from "./helpers/upstream.js";

const ROUTES = `routes:
  - path: /v1/echo
    methods: [GET, POST]
    auth: none
`;

const { upstream, seen } = await startSlowUpstream(20);
const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
t.teardown(async () => {
  await gh.close();
  await upstream.close();
});

const get = (target: string, version = "1.1"): string =>
  `GET ${target} HTTP/${version}\r\nHost: gatehouse.test\r\n\r\n`;

/** The urls the upstream received whose query carries `tag`. */
const reached = (tag: string): string[] =>
  upstream.received.filter((r) => r.url.includes(tag)).map((r) => r.url);

t.test("pipelined requests reach the upstream one at a time, in order", async (t) => {
  seen.most = 0;
  const { responses } = await exchange(
    gh.port,
    get("/v1/echo?order=1") + get("/v1/echo?order=2") + get("/v1/echo?order=3"),
    3,
  );
  t.same(
    responses.map((r) => JSON.parse(r.body) as unknown),
    [{ url: "/v1/echo?order=1" }, { url: "/v1/echo?order=2" }, { url: "/v1/echo?order=3" }],
    "one answer per request, in the order asked",
  );
  t.same(reached("order="), ["/v1/echo?order=1", "/v1/echo?order=2", "/v1/echo?order=3"]);
  t.equal(seen.most, 1, "never two requests of the connection in flight at the upstream");
});

t.test("a refused pipelined request does not hold up the ones behind it", async (t) => {
  const { responses } = await exchange(gh.port, get("/v1/nowhere") + get("/v1/echo?behind=1"), 2);
  t.same(
    responses.map((r) => r.status),
    [404, 200],
  );
  t.same(reached("behind="), ["/v1/echo?behind=1"]);
});

t.test(
  "a request the parser refuses is answered 400 after the answers owed before it",
  async (t) => {
    const { responses, closedByServer, text } = await exchange(
      gh.port,
      get("/v1/echo?owed=1") +
        get("/v1/echo?owed=2") +
        "GET /v1/echo?owed=3 HTTP/1.1\r\nHost: gatehouse.test\r\nX-Bad: a\0b\r\n\r\n" +
        get("/v1/echo?owed=4"),
      Infinity,
    );
    t.ok(closedByServer);
    t.same(
      responses.map((r) => r.status),
      [200, 200, 400],
      "both answers owed, in order, then the 400",
    );
    t.equal(responses[2]?.headers.connection, "close");
    t.equal(text, responses.map((r) => r.text).join(""), "nothing else was written");
    t.same(reached("owed="), ["/v1/echo?owed=1", "/v1/echo?owed=2"]);
  },
);

const UPGRADE = "Connection: Upgrade\r\nUpgrade: websocket\r\n";
// [what, the request carrying Upgrade]
const upgrades: Array<[string, string]> = [
  ["a WebSocket handshake", `GET /v1/echo?up=1 HTTP/1.1\r\nHost: gatehouse.test\r\n${UPGRADE}\r\n`],
  [
    "an h2c upgrade",
    "GET /v1/echo?up=2 HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
      "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
  ],
  [
    "a body",
    `POST /v1/echo?up=3 HTTP/1.1\r\nHost: gatehouse.test\r\n${UPGRADE}Content-Length: 2\r\n\r\nok`,
  ],
];

for (const [what, request] of upgrades) {
  t.test(
    `a request carrying Upgrade (${what}) is served as plain HTTP/1.1, and the next one too`,
    async (t) => {
      const tag = `upnext${what.length}`;
      const { responses } = await exchange(gh.port, request + get(`/v1/echo?${tag}=1`), 2);
      t.same(
        responses.map((r) => r.status),
        [200, 200],
        "no 101, and the request behind it in the same packet is answered",
      );
      const served = upstream.received.find((r) => r.url.startsWith("/v1/echo?up="));
      t.equal(served?.headers.upgrade, undefined, "Upgrade is hop-by-hop: never forwarded");
      t.same(reached(tag), [`/v1/echo?${tag}=1`]);
      upstream.received.splice(
        upstream.received.indexOf(served as (typeof upstream.received)[0]),
        1,
      );
    },
  );
}

t.test("a request carrying Upgrade pipelined behind others is answered in its turn", async (t) => {
  const { responses } = await exchange(
    gh.port,
    get("/v1/echo?turn=1") +
      `GET /v1/echo?turn=2 HTTP/1.1\r\nHost: gatehouse.test\r\n${UPGRADE}\r\n` +
      get("/v1/echo?turn=3"),
    3,
  );
  t.same(
    responses.map((r) => (JSON.parse(r.body) as { url: string }).url),
    ["/v1/echo?turn=1", "/v1/echo?turn=2", "/v1/echo?turn=3"],
  );
  t.same(reached("turn="), ["/v1/echo?turn=1", "/v1/echo?turn=2", "/v1/echo?turn=3"]);
});

t.test("a client far ahead of its answers is cut off after the last one it is owed", async (t) => {
  const targets = Array.from({ length: MAX_WAITING + 8 }, (_, i) => `/v1/echo?ahead=${i}`);
  const { responses, closedByServer } = await exchange(
    gh.port,
    targets.map((target) => get(target)).join(""),
    targets.length,
  );
  const urls = responses.map((r) => (JSON.parse(r.body) as { url: string }).url);
  t.same(urls, targets.slice(0, urls.length), "answers in order, each its own request's");
  t.same(reached("ahead="), urls, "exactly the answered requests were forwarded");
  // Written in one packet, all are parsed at once: one in progress and 32 waiting are answered.
  // Should the requests arrive in several reads, the connection is read as they are answered.
  if (responses.length < targets.length) {
    t.equal(responses.length, MAX_WAITING + 1);
    t.equal(responses.at(-1)?.headers.connection, "close");
    t.ok(closedByServer);
  }
});

// [what closes, the request whose answer closes, its status]
const closing: Array<[string, string, number]> = [
  ["an HTTP/1.0 request without keep-alive", get("/v1/echo?closer=1", "1.0"), 200],
  [
    "Connection: close",
    "GET /v1/echo?closer=2 HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n\r\n",
    200,
  ],
  [
    "a 501 for Transfer-Encoding: gzip, chunked",
    "POST /v1/echo?closer=3 HTTP/1.1\r\nHost: gatehouse.test\r\n" +
      "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    501,
  ],
  [
    "a 400 for chunked HTTP/1.0",
    "POST /v1/echo?closer=4 HTTP/1.0\r\nHost: gatehouse.test\r\nTransfer-Encoding: chunked\r\n\r\n" +
      "0\r\n\r\n",
    400,
  ],
];

for (const [what, request, status] of closing) {
  t.test(`after ${what}, nothing more read from the connection is handled`, async (t) => {
    const tag = `after${status}-${what.length}`;
    const before = upstream.received.length;
    const { responses, closedByServer, text } = await exchange(
      gh.port,
      request +
        get(`/v1/echo?${tag}=1`) +
        `GET /v1/echo?${tag}=2 HTTP/1.1\r\nHost: gatehouse.test\r\n${UPGRADE}\r\n`,
      3,
    );
    t.ok(closedByServer, "gatehouse closed the connection");
    t.equal(responses.length, 1, "one answer, to the request that closed");
    t.equal(responses[0]?.status, status);
    t.equal(responses[0]?.headers.connection, "close");
    t.equal(text, responses[0]?.text, "nothing else was written");
    t.same(reached(tag), [], "the requests behind it never reached the upstream");
    const forwarded = status === 200 ? 1 : 0;
    t.equal(upstream.received.length, before + forwarded);
  });
}

t.test("while draining, requests pipelined behind a closing answer are not handled", async (t) => {
  let release = (): void => undefined;
  const arrived = new Promise<void>((first) => {
    release = first;
  });
  let answer: (() => void) | undefined;
  const held = await startUpstream((req, res) => {
    answer = () => res.end(JSON.stringify({ url: req.url }));
    release();
  });
  t.teardown(() => held.close());
  const g = await startTestGatehouse(configFor(held.url, ROUTES));
  const result = exchange(g.port, get("/v1/echo?draining=1") + get("/v1/echo?draining=2"), 2);
  await arrived;
  const stopping = g.close();
  answer?.();
  const { responses, closedByServer } = await result;
  await stopping;
  t.ok(closedByServer);
  t.same(
    responses.map((r) => [r.status, r.headers.connection]),
    [[200, "close"]],
  );
  t.same(
    held.received.map((r) => r.url),
    ["/v1/echo?draining=1"],
  );
});
