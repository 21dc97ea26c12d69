/**
 * What gatehouse makes of the upstream's response, through real sockets: repeated fields, the
 * ways a body can be delimited, a response that is not HTTP, and when an upstream connection is
 * used again.
 */
import { connect } from "node:net";
import t from "tap";
import { json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { splitResponses } from "./helpers/pipeline.js";
import { type RawResponse } from "./helpers/raw.js";
import { startRawUpstream, type RawExchange } from "./helpers/raw-upstream.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET]
    auth: none
`;

const OK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const REPEATED =
  "HTTP/1.1 200 OK\r\nSet-Cookie: a=1; Path=/\r\nSet-Cookie: b=2; Path=/\r\n" +
  "Location: /first\r\nLocation: /second\r\nX-Multi: a\r\nX-Multi: b\r\n" +
  "Content-Length: 2\r\n\r\nok";
// Larger than one read, so the close-delimited body comes in several pieces.
const LONG_BODY = "0123456789abcdef".repeat(8192);
const CHUNKED =
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n" +
  "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 3e25960a\r\n\r\n";

/** Answers by path, as the upstream's wire would carry them. */
function answer(ex: RawExchange): void {
  switch (ex.path) {
    case "/v1/repeated":
      ex.socket.write(REPEATED);
      return;
    case "/v1/until-close":
      // Neither Content-Length nor chunked: the body ends where the connection does.
      ex.socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n");
      ex.socket.write(LONG_BODY.slice(0, 1000));
      ex.socket.end(LONG_BODY.slice(1000));
      return;
    case "/v1/chunked-trailer":
      ex.socket.write(CHUNKED);
      return;
    case "/v1/garbage":
      ex.socket.end("this is not a status line\r\n\r\n");
      return;
    case "/v1/del-in-reason":
      // llhttp passes a DEL in the reason phrase; RFC 9112 §4 and Node's server do not.
      ex.socket.write("HTTP/1.1 200 O\x7fK\r\nContent-Length: 2\r\n\r\nok", "latin1");
      return;
    case "/v1/closing":
      ex.socket.end("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
      return;
    default:
      ex.socket.write(OK);
  }
}

/** The raw header lines named `name` (any case), in order. */
function lines(rawHeaders: readonly string[], name: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() === name) found.push(rawHeaders[i + 1] as string);
  }
  return found;
}

t.test("responses as the upstream delimits them", async (t) => {
  const upstream = await startRawUpstream(answer);
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });

  t.test("repeated fields: every cookie, the first Location, a joined list", async (t) => {
    const res = await send(`${gh.url}/v1/repeated`);
    t.equal(res.status, 200);
    t.same(lines(res.rawHeaders, "set-cookie"), ["a=1; Path=/", "b=2; Path=/"], "two lines");
    t.same(lines(res.rawHeaders, "location"), ["/first"]);
    t.same(lines(res.rawHeaders, "x-multi"), ["a, b"]);
    t.equal(res.body.toString(), "ok");
  });

  t.test("a body delimited by the upstream's close reaches the client whole", async (t) => {
    const res = await send(`${gh.url}/v1/until-close`);
    t.equal(res.status, 200);
    t.equal(res.headers["content-type"], "text/plain");
    t.equal(res.body.length, LONG_BODY.length);
    t.ok(res.body.toString() === LONG_BODY, "every byte, in order");
  });

  t.test("a chunked body with a trailer reaches the client intact", async (t) => {
    const res = await send(`${gh.url}/v1/chunked-trailer`);
    t.equal(res.status, 200);
    t.equal(res.body.toString(), "hello world");
    const after = await send(`${gh.url}/v1/after-trailer`);
    t.equal(after.status, 200, "the connection the trailer came on serves the next request");
    t.equal(after.body.toString(), "ok");
    const [trailed, next] = upstream.received.slice(-2);
    t.equal(next?.connection, trailed?.connection, "on the same upstream connection");
  });

  t.test("garbage instead of a status line is a 502 bad_gateway", async (t) => {
    const res = await send(`${gh.url}/v1/garbage`);
    t.equal(res.status, 502);
    t.match(json(res), { error: "bad_gateway", message: String });
    t.equal((await send(`${gh.url}/v1/fine`)).status, 200, "the next request is served");
  });

  t.test(
    "a reason phrase Node's server cannot write is a 502, and the process lives",
    async (t) => {
      const res = await send(`${gh.url}/v1/del-in-reason`);
      t.equal(res.status, 502);
      t.match(json(res), { error: "bad_gateway", message: String });
      t.equal((await send(`${gh.url}/v1/fine`)).status, 200, "the next request is served");
    },
  );
});

/** One client connection: each request written once the answer to the one before arrived. */
async function oneByOne(port: number, requests: string[]): Promise<RawResponse[]> {
  const socket = connect(port, "127.0.0.1");
  socket.setEncoding("latin1");
  let text = "";
  let waiting: (() => void) | undefined;
  let failure: Error | undefined;
  socket.on("data", (chunk: string) => {
    text += chunk;
    waiting?.();
  });
  socket.on("error", (error) => (failure = error));
  socket.on("close", () => waiting?.());
  try {
    for (const [i, request] of requests.entries()) {
      socket.write(request);
      while (splitResponses(text).length <= i) {
        if (failure !== undefined || socket.destroyed) {
          throw new Error(`the connection ended after ${i} answers: ${failure?.message ?? ""}`);
        }
        await new Promise<void>((done) => (waiting = done));
      }
    }
    return splitResponses(text);
  } finally {
    socket.destroy();
  }
}

t.test("upstream connections are reused until the upstream closes one", async (t) => {
  const upstream = await startRawUpstream(answer);
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n`;
  const responses = await oneByOne(gh.port, [
    get("/v1/one"),
    get("/v1/two"),
    get("/v1/closing"),
    get("/v1/three"),
  ]);
  t.same(
    responses.map((r) => [r.status, r.body]),
    [
      [200, "ok"],
      [200, "ok"],
      [200, "ok"],
      [200, "ok"],
    ],
  );
  t.not(responses[2]?.headers.connection, "close", "the upstream's close stays between the two");
  t.same(
    upstream.received.map((ex) => [ex.path, ex.connection, ex.index]),
    [
      ["/v1/one", 0, 0],
      ["/v1/two", 0, 1],
      ["/v1/closing", 0, 2],
      ["/v1/three", 1, 0],
    ],
    "one connection until its Connection: close, then a new one",
  );
});
