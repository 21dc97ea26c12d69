/**
 * Faulty HTTP/1.1 framing through a real socket (RFC 9112 §5, §6): what Node's parser
 * refuses is answered with gatehouse's JSON error body and a closed connection, slow clients meet
 * their deadlines, and nothing reaches the upstream.
 */
import { connect } from "node:net";
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { exchange } from "./helpers/pipeline.js";
import { parseResponse, rawRequest, type RawResponse } from "./helpers/raw.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
const gh = await startTestGatehouse(
  configFor(
    upstream.url,
    `routes:
  - path: /v1/echo
    methods: [GET, POST]
    auth: none
`,
  ),
  { clientTimeouts: { headersMs: 1000, tokenBodyMs: 300 } },
);
t.teardown(async () => {
  await gh.close();
  await upstream.close();
});

// Sent first in every request below: whatever the parser refuses, the answer never reflects it.
const CANARY = "X-Probe: reflected-canary\r\n";

/** A request to a forwarded route, so only the parser can refuse it before the upstream. */
function post(headers: string, body = ""): string {
  return `POST /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\n${CANARY}${headers}\r\n${body}`;
}

/** The JSON error body of a raw answer, or undefined when it is not one. */
function errorBody(res: RawResponse): Record<string, unknown> | undefined {
  try {
    return JSON.parse(res.body) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

// [what is wrong, the request]; each is 400 invalid_request from the parser, because a proxy
// and its upstream that frame such a message differently can be made to smuggle a request
// (RFC 9112 §6.3, §5.1, §5.2).
const refused: Array<[string, string]> = [
  [
    "Content-Length with Transfer-Encoding",
    post("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
  ],
  [
    "two different Content-Length values",
    post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd"),
  ],
  ["two identical Content-Length lines", post("Content-Length: 3\r\nContent-Length: 3\r\n", "abc")],
  ["Content-Length: 3, 3", post("Content-Length: 3, 3\r\n", "abc")],
  ["Content-Length: +3", post("Content-Length: +3\r\n", "abc")],
  ["Content-Length: 3 3", post("Content-Length: 3 3\r\n", "abc")],
  ["Content-Length: 0x3", post("Content-Length: 0x3\r\n", "abc")],
  ["Content-Length: -1", post("Content-Length: -1\r\n", "abc")],
  ["an empty Content-Length", post("Content-Length: \r\n", "abc")],
  ["a space before the Content-Length name", post(" Content-Length: 3\r\n", "abc")],
  ["Transfer-Encoding: xchunked", post("Transfer-Encoding: xchunked\r\n", "0\r\n\r\n")],
  [
    "Transfer-Encoding: chunked, identity",
    post("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"),
  ],
  [
    "Transfer-Encoding: chunked, chunked",
    post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n"),
  ],
  [
    "two Transfer-Encoding lines",
    post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
  ],
  ["Transfer-Encoding folded (obs-fold)", post("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n")],
  ["Transfer-Encoding: gzip (chunked not final)", post("Transfer-Encoding: gzip\r\n", "0\r\n\r\n")],
  ["obs-fold in a header", post("X-Folded: a\r\n b\r\nContent-Length: 0\r\n")],
  ["a space before the colon", post("Content-Length : 0\r\n")],
  ["a bare CR in a value", post("X-Bad: a\rb\r\nContent-Length: 0\r\n")],
  ["a NUL in a value", post("X-Bad: a\0b\r\nContent-Length: 0\r\n")],
  ["0x7F in a value", post("X-Bad: a\x7fb\r\nContent-Length: 0\r\n")],
  ["the header section ending in \\r\\n\\rX", post("Content-Length: 0\r\n\rX\r\n")],
  [
    "a chunked request whose trailer carries Content-Length",
    post("Transfer-Encoding: chunked\r\n", "1\r\na\r\n0\r\nContent-Length: 5\r\n\r\n"),
  ],
  ["the lower-case method get", `get /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\n${CANARY}\r\n`],
];

for (const [what, request] of refused) {
  t.test(`${what} is 400 invalid_request with a JSON body, and closes`, async (t) => {
    const before = upstream.received.length;
    const res = await rawRequest(gh.port, request);
    t.equal(res.status, 400);
    t.match(res.headers["content-type"], /^application\/json/);
    t.equal(res.headers.connection, "close");
    t.equal(Number(res.headers["content-length"]), Buffer.byteLength(res.body), "framed exactly");
    const body = errorBody(res);
    t.equal(body?.error, "invalid_request");
    t.type(body?.message, "string");
    t.notMatch(res.text, /reflected-canary/, "the request is never reflected");
    t.equal(upstream.received.length, before, "nothing reached the upstream");
  });
}

t.test("HTTP/1.1 without Host is 400 with a JSON body; HTTP/1.0 needs none", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, `GET /v1/echo HTTP/1.1\r\n${CANARY}\r\n`);
  t.equal(res.status, 400);
  t.match(res.headers["content-type"], /^application\/json/);
  t.match(errorBody(res), { error: "invalid_request", message: /Host/ });
  t.equal(upstream.received.length, before, "nothing reached the upstream");
  const old = await rawRequest(gh.port, `GET /v1/echo HTTP/1.0\r\n\r\n`);
  t.equal(old.status, 200, "RFC 9112 §3.2 asks Host of HTTP/1.1 only");
  t.equal(upstream.received.length, before + 1);
});

t.test("a header section over 16 KiB is 431 with a JSON body, and closes", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    `GET /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
  );
  t.equal(res.status, 431);
  t.match(res.headers["content-type"], /^application\/json/);
  t.equal(res.headers.connection, "close");
  const body = errorBody(res);
  t.equal(body?.error, "request_header_fields_too_large");
  t.type(body?.message, "string");
  t.equal(upstream.received.length, before);
});

/** What a trickling client saw: the answer, and whether the server closed the connection. */
interface Trickled {
  readonly res: RawResponse;
  readonly closedByServer: boolean;
}

/**
 * Writes `head`, then `drip` every 100 ms until the server answers or closes; gives up after
 * `maxDrips` and closes itself (then `closedByServer` is false).
 */
function trickle(head: string, drip: string, maxDrips = 100): Promise<Trickled> {
  return new Promise((resolve) => {
    const socket = connect(gh.port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let drips = 0;
    let closedByServer = true;
    const timer = setInterval(() => {
      if (++drips > maxDrips) {
        closedByServer = false;
        socket.destroy();
      } else if (!socket.destroyed && socket.writable) {
        socket.write(drip);
      }
    }, 100);
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", () => undefined);
    socket.on("close", () => {
      clearInterval(timer);
      resolve({
        res: parseResponse(Buffer.concat(chunks).toString("latin1")),
        closedByServer,
      });
    });
    socket.write(head);
  });
}

t.test("headers trickled past the header deadline get 408 and the connection closes", async (t) => {
  const before = upstream.received.length;
  const { res, closedByServer } = await trickle(
    "GET /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\n",
    "X-Slow: 1\r\n",
  );
  t.ok(closedByServer, "gatehouse closed the connection");
  t.equal(res.status, 408);
  t.match(res.headers["content-type"], /^application\/json/);
  t.equal(res.headers.connection, "close");
  const body = errorBody(res);
  t.equal(body?.error, "request_timeout");
  t.type(body?.message, "string");
  t.equal(upstream.received.length, before);
});

t.test("a token request body trickled past its deadline gets 408 and closes", async (t) => {
  const { res, closedByServer } = await trickle(
    "POST /oauth/token HTTP/1.1\r\nHost: gatehouse.test\r\n" +
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 200\r\n\r\ngrant_type=",
    "c",
  );
  t.ok(closedByServer, "gatehouse closed the connection");
  t.equal(res.status, 408);
  t.match(res.headers["content-type"], /^application\/json/);
  t.equal(res.headers.connection, "close");
  t.equal(res.headers["cache-control"], "no-store", "RFC 6749 §5.1: never cached");
  const body = errorBody(res);
  t.equal(body?.error, "request_timeout");
  t.type(body?.error_description, "string");
});

t.test("a token request whose body arrives in time is not cut by the deadline", async (t) => {
  const res = await rawRequest(
    gh.port,
    "POST /oauth/token HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n" +
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 29\r\n\r\n" +
      "grant_type=client_credentials",
  );
  t.equal(res.status, 401, "read whole and answered: no credentials");
  t.equal(errorBody(res)?.error, "invalid_client");
});

// [what, Transfer-Encoding field lines, status, error]: RFC 9112 §6.1 and §6.3.
const codings: Array<[string, string, number, string]> = [
  ["identity, chunked", "Transfer-Encoding: identity, chunked\r\n", 501, "not_implemented"],
  ["gzip, chunked", "Transfer-Encoding: gzip, chunked\r\n", 501, "not_implemented"],
  ["a parameter on gzip", "Transfer-Encoding: gzip;level=9, chunked\r\n", 501, "not_implemented"],
  [
    "two lines, gzip then chunked",
    "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
    501,
    "not_implemented",
  ],
  ["a quoted coding", 'Transfer-Encoding: "gzip", chunked\r\n', 400, "invalid_request"],
  [
    "a parameter without a value",
    "Transfer-Encoding: gzip;level, chunked\r\n",
    400,
    "invalid_request",
  ],
  [
    "chunked, then chunked again",
    "Transfer-Encoding: chunked, x, chunked\r\n",
    400,
    "invalid_request",
  ],
];

for (const [what, lines, status, code] of codings) {
  t.test(
    `Transfer-Encoding ${what} is ${status} ${code}, closes, and is never forwarded`,
    async (t) => {
      const before = upstream.received.length;
      const { responses, closedByServer } = await exchange(
        gh.port,
        post(lines, "0\r\n\r\n") + "GET /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n",
        2,
      );
      t.ok(closedByServer, "the connection is closed");
      t.equal(responses.length, 1, "the request behind it is not handled");
      const res = responses[0] as RawResponse;
      t.equal(res.status, status);
      t.equal(res.headers.connection, "close");
      t.match(res.headers["content-type"], /^application\/json/);
      t.match(errorBody(res), { error: code, message: /Transfer-Encoding/ });
      t.notMatch(res.text, /reflected-canary/, "the request is never reflected");
      t.equal(upstream.received.length, before, "nothing reached the upstream");
    },
  );
}

t.test(
  "Transfer-Encoding: chunked in any case, with empty list members, is forwarded",
  async (t) => {
    const before = upstream.received.length;
    const { responses } = await exchange(
      gh.port,
      post("Transfer-Encoding: , CHUNKED\r\n", "2\r\nok\r\n0\r\n\r\n"),
      1,
    );
    t.equal(responses[0]?.status, 200);
    t.equal(upstream.received.length, before + 1);
    t.equal(upstream.received.at(-1)?.body.toString(), "ok");
    upstream.received.pop();
  },
);

t.test("an absolute-form target's authority replaces Host (RFC 9112 §3.2.2)", async (t) => {
  const res = await rawRequest(
    gh.port,
    "GET http://other.example:8443/v1/echo?x=1 HTTP/1.1\r\nHost: gatehouse.test\r\n" +
      "Connection: close\r\n\r\n",
  );
  t.equal(res.status, 200);
  const received = upstream.received.at(-1);
  t.equal(received?.url, "/v1/echo?x=1", "routed and forwarded on its path");
  t.equal(received?.headers["x-forwarded-host"], "other.example:8443", "the target's authority");
  t.equal(received?.headers.host, `127.0.0.1:${upstream.port}`, "Host is the upstream's");
  upstream.received.pop();
});

for (const target of [
  "http://user@other.example/v1/echo",
  "http:///v1/echo",
  "http://:80/v1/echo",
]) {
  t.test(`an absolute-form target without a valid host (${target}) is 400`, async (t) => {
    const before = upstream.received.length;
    const res = await rawRequest(
      gh.port,
      `GET ${target} HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n\r\n`,
    );
    t.equal(res.status, 400);
    t.match(errorBody(res), { error: "invalid_request", message: /absolute request-target/ });
    t.equal(upstream.received.length, before);
  });
}

// Last: a good request goes through, so anything refused above that was still on its way to the
// upstream would have arrived by now.
t.test("only a well-framed request ever reached the upstream", async (t) => {
  const res = await rawRequest(
    gh.port,
    "POST /v1/echo HTTP/1.1\r\nHost: gatehouse.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
  );
  t.equal(res.status, 200);
  t.same(
    upstream.received.map((r) => `${r.method} ${r.body.toString()}`),
    ["GET ", "POST ok"],
    "the HTTP/1.0 GET without Host and this request, nothing else",
  );
});
