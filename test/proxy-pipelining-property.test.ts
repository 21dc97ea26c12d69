/**
 * A property over random pipelined sequences of allowed, refused and closing requests written at
 * once on one connection: the upstream receives exactly the allowed requests up to the first
 * answer that closes, in order and never two at a time, and the client gets one answer per
 * request it was answered, in order.
 */
import { strict as assert } from "node:assert";
import fc from "fast-check";
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { exchange } from "./helpers/pipeline.js";
import { startSlowUpstream } from "./helpers/upstream.js";

// Answered a little later, so a request forwarded too early would find another one in flight.
const { upstream, seen } = await startSlowUpstream(2);
const gh = await startTestGatehouse(
  configFor(
    upstream.url,
    `routes:
  - path: /v1/echo
    methods: [GET, POST]
    auth: none
`,
  ),
);
t.teardown(async () => {
  await gh.close();
  await upstream.close();
});

/** One kind of request: its bytes for a target, its status, and whether it is forwarded or closes. */
interface Kind {
  readonly name: string;
  readonly bytes: (target: string) => string;
  readonly status: number;
  readonly forwarded: boolean;
  readonly closes: boolean;
}

const HOST = "Host: gatehouse.test\r\n";
const KINDS: readonly Kind[] = [
  {
    name: "allowed",
    bytes: (target) => `GET ${target} HTTP/1.1\r\n${HOST}\r\n`,
    status: 200,
    forwarded: true,
    closes: false,
  },
  {
    name: "allowed with a body",
    bytes: (target) => `POST ${target} HTTP/1.1\r\n${HOST}Content-Length: 2\r\n\r\nok`,
    status: 200,
    forwarded: true,
    closes: false,
  },
  {
    name: "allowed, carrying Upgrade",
    bytes: (target) =>
      `GET ${target} HTTP/1.1\r\n${HOST}Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    status: 200,
    forwarded: true,
    closes: false,
  },
  {
    name: "no route",
    bytes: (target) => `GET ${target.replace("/v1/echo", "/v1/none")} HTTP/1.1\r\n${HOST}\r\n`,
    status: 404,
    forwarded: false,
    closes: false,
  },
  {
    name: "wrong method with a body",
    bytes: (target) => `PUT ${target} HTTP/1.1\r\n${HOST}Content-Length: 3\r\n\r\nabc`,
    status: 405,
    forwarded: false,
    closes: false,
  },
  {
    name: "HTTP/1.0, forwarded, closes",
    bytes: (target) => `GET ${target} HTTP/1.0\r\n\r\n`,
    status: 200,
    forwarded: true,
    closes: true,
  },
  {
    name: "Connection: close, forwarded",
    bytes: (target) => `GET ${target} HTTP/1.1\r\n${HOST}Connection: close\r\n\r\n`,
    status: 200,
    forwarded: true,
    closes: true,
  },
  {
    name: "refused by the parser (a NUL in a field), closing",
    bytes: (target) => `GET ${target} HTTP/1.1\r\n${HOST}X-Bad: a\0b\r\n\r\n`,
    status: 400,
    forwarded: false,
    closes: true,
  },
  {
    name: "refused and closing (gzip, chunked)",
    bytes: (target) =>
      `POST ${target} HTTP/1.1\r\n${HOST}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
    status: 501,
    forwarded: false,
    closes: true,
  },
];

let run = 0;
let runs = 0;

t.test(
  "pipelined sequences: the upstream gets the allowed requests before the first close, one at a time",
  async (t) => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...KINDS), { minLength: 1, maxLength: 8 }),
        async (kinds) => {
          const tag = `run${++run}`;
          const targets = kinds.map((_, i) => `/v1/echo?${tag}=${i}`);
          const firstClose = kinds.findIndex((kind) => kind.closes);
          const answered = firstClose === -1 ? kinds.length : firstClose + 1;
          seen.most = 0;
          const { responses, closedByServer } = await exchange(
            gh.port,
            kinds.map((kind, i) => kind.bytes(targets[i] as string)).join(""),
            // With an answer that closes, read until gatehouse closes, to see that nothing follows.
            firstClose === -1 ? kinds.length : Infinity,
          );
          const received = upstream.received
            .filter((r) => r.url.includes(`${tag}=`))
            .map((r) => r.url);
          const expected = targets.slice(0, answered).filter((_, i) => kinds[i]?.forwarded);
          // One answer per request answered, in order, each its own request's.
          assert.deepEqual(
            responses.map((r) => r.status),
            kinds.slice(0, answered).map((kind) => kind.status),
          );
          assert.deepEqual(
            responses
              .filter((r) => r.status === 200)
              .map((r) => (JSON.parse(r.body) as { url: string }).url),
            expected,
          );
          // The allowed requests before the first close, in order, never two at once.
          assert.deepEqual(received, expected);
          assert.ok(seen.most <= 1, "two requests of one connection were at the upstream at once");
          assert.equal(closedByServer, firstClose !== -1);
          runs++;
        },
      ),
      { numRuns: 40, interruptAfterTimeLimit: 30_000 },
    );
    t.ok(runs >= 10, `the property held over ${runs} sequences`);
  },
);
