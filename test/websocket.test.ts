/**
 * WebSocket through gatehouse, with the `ws` package's client and server on real sockets: the
 * handshake passes every stage, the upstream's 101 is relayed with what it negotiated, frames pass
 * both ways, and a refusal is an HTTP answer that never reaches the upstream.
 */
import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import t, { type Test } from "tap";
import type { RawData } from "ws";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { eventually } from "./helpers/client.js";
import { closed, nextMessage, openWs, startWsUpstream } from "./helpers/websocket.js";

const APP = { id: "dashboard", secret: "5d41402abc4b2a76b9719d911017c592", extra: ["plan: live"] };
const READER = { id: "reader", secret: "7d793037a0760186574b0282f2f435e7", extra: ["plan: live"] };

const upstream = await startWsUpstream({
  perMessageDeflate: true,
  handleProtocols: (offered) => [...offered].at(-1) ?? false,
});
t.teardown(() => upstream.close());

const routes = `plans:
  live:
    rate_limit: { limit: 1000, window: 1h }
    connections: 2
  anonymous:
    rate_limit: { limit: 1000, window: 1h }
tokens:
  scopes: [feed]
routes:
  - path: /ws
    methods: [GET]
    auth: bearer
    websocket: true
  - path: /ws/scoped
    methods: [GET]
    scopes: [feed]
    websocket: true
  - path: /plain
    methods: [GET]
    auth: none
`;
const g: TestGatehouse = await startTestGatehouse(
  configFor(upstream.url, `${await clientsYaml([APP, READER])}${routes}`),
);
t.teardown(() => g.close());
const wsUrl = (path: string): string => `${g.url.replace("http:", "ws:")}${path}`;
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

t.test(
  "frames pass both ways on an authenticated route; the 101 has gatehouse's headers",
  async (t) => {
    const token = await obtainToken(g.url, APP);
    const opened = await openWs(wsUrl("/ws"), bearer(token));
    if (!("ws" in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`);
    const { ws, headers } = opened;
    t.match(headers["x-request-id"], /^[0-9a-f]{32}$/, "X-Request-Id on the 101");
    t.equal(headers["x-ratelimit-limit"], "1000", "the limit's headers on the 101");
    const seen = upstream.handshakes.at(-1) as IncomingMessage;
    t.equal(seen.headers["x-client-id"], APP.id, "the upstream knows the client");
    t.equal(seen.headers.authorization, undefined, "and never gets the token");
    ws.send("hello");
    t.same(await nextMessage(ws), { data: Buffer.from("hello"), binary: false }, "text");
    const bytes = Buffer.from([0, 1, 2, 254, 255]);
    ws.send(bytes);
    t.same(await nextMessage(ws), { data: bytes, binary: true }, "binary");
    // Random bytes: permessage-deflate, which ws negotiates by default, cannot shrink them.
    const large = randomBytes(1 << 20);
    ws.send(large);
    t.ok((await nextMessage(ws)).data.equals(large), "a 1 MiB frame");
    const many = Array.from({ length: 200 }, (_, i) => `m${i}`);
    const received: string[] = [];
    const all = new Promise<void>((done) =>
      ws.on("message", (data: RawData) => {
        received.push(String(data));
        if (received.length === many.length) done();
      }),
    );
    for (const text of many) ws.send(text);
    await all;
    t.strictSame(received, many, "many small frames, in order");
    const end = closed(ws);
    ws.close(1000, "bye");
    t.equal((await end).code, 1000);
    const line = await g.logged((entry) => entry.status === 101 && entry.route === "/ws");
    t.match(line, { clientId: APP.id, closedBy: "client", closeReason: "close_frame" });
    t.ok((line.bytesIn as number) > large.length && (line.bytesOut as number) > large.length);
    t.ok(await eventually(() => upstream.closes.includes(1000)), "the upstream saw 1000");
    t.equal(await metric(g, "gatehouse_websocket_connections", { route: "/ws" }), 0);
    t.equal(
      await metric(g, "gatehouse_websocket_closes_total", { route: "/ws", closed_by: "client" }),
      1,
    );
  },
);

t.test("the upstream's subprotocol and permessage-deflate reach the client", async (t) => {
  const token = await obtainToken(g.url, APP);
  const opened = await openWs(wsUrl("/ws"), bearer(token), ["chat.v1", "chat.v2"], {
    perMessageDeflate: true,
  });
  if (!("ws" in opened)) throw new Error(`refused: ${opened.status}`);
  const { ws } = opened;
  t.equal(ws.protocol, "chat.v2", "the protocol the upstream chose");
  t.match(ws.extensions, /permessage-deflate/, "compression negotiated end to end");
  const text = "compressible ".repeat(1000);
  ws.send(text);
  t.equal(String((await nextMessage(ws)).data), text);
  const end = closed(ws);
  ws.close();
  await end;
});

t.test("a refused handshake is an HTTP answer and never reaches the upstream", async (t) => {
  const before = upstream.handshakes.length;
  const missing = await openWs(wsUrl("/ws"));
  t.match(missing, { status: 401 }, "no token");
  const forged = await openWs(wsUrl("/ws"), bearer("abc.def.ghi"));
  t.match(forged, { status: 401 }, "a token that is no JWT");
  const scoped = await openWs(wsUrl("/ws/scoped"), bearer(await obtainToken(g.url, APP)));
  t.match(scoped, { status: 403 }, "a token without the route's scope");
  if ("body" in scoped) t.match(JSON.parse(scoped.body), { error: "insufficient_scope" });
  t.equal(upstream.handshakes.length, before, "nothing forwarded");
});

t.test(
  "connections: over the plan's bound, 429 policy connections; a close frees it",
  async (t) => {
    const token = await obtainToken(g.url, READER);
    const first = await openWs(wsUrl("/ws"), bearer(token));
    const second = await openWs(wsUrl("/ws"), bearer(token));
    if (!("ws" in first) || !("ws" in second)) throw new Error("refused below the bound");
    const third = await openWs(wsUrl("/ws"), bearer(token));
    t.match(third, { status: 429 });
    if ("body" in third) {
      t.match(JSON.parse(third.body), { error: "rate_limited", policy: "connections", limit: 2 });
      t.equal(third.headers["retry-after"], "1");
    }
    const end = closed(first.ws);
    first.ws.close();
    await end;
    t.ok(
      await eventually(async () => {
        const again = await openWs(wsUrl("/ws"), bearer(token));
        if (!("ws" in again)) return false;
        again.ws.close();
        return true;
      }),
      "the closed connection's slot is free again",
    );
    second.ws.close();
  },
);

t.test("an Upgrade that is not WebSocket, or off a websocket route, is plain HTTP", async (t) => {
  const token = await obtainToken(g.url, APP);
  const h2c = await fetchRaw(g.port, "/ws", `Authorization: Bearer ${token}\r\nUpgrade: h2c\r\n`);
  t.match(h2c, /^HTTP\/1\.1 200 /, "Upgrade: h2c on the websocket route: served");
  t.equal(upstream.plain.at(-1)?.headers.upgrade, undefined, "without the Upgrade field");
  const off = await openWs(wsUrl("/plain"));
  t.match(off, { status: 200, body: "plain -" }, "a handshake on a plain route: a plain GET");
});

t.test("a WebSocket handshake in HTTP/1.0 is served as plain HTTP (RFC 9110 §7.8)", async (t) => {
  const token = await obtainToken(g.url, APP);
  const plainBefore = upstream.plain.length;
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(g.port, "127.0.0.1");
    let text = "";
    socket.on("data", (chunk: Buffer) => (text += chunk.toString("latin1")));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
    socket.write(
      `GET /ws HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nUpgrade: websocket\r\n` +
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
        "Sec-WebSocket-Version: 13\r\n\r\n",
    );
  });
  t.match(answer, /^HTTP\/1\.1 200 /, "answered as a plain GET");
  t.equal(upstream.plain.length, plainBefore + 1, "which reached the upstream as one");
  t.equal(upstream.plain.at(-1)?.headers.upgrade, undefined, "without the Upgrade field");
});

/** A raw connection to `port`, and every byte it received so far. */
function rawClient(port: number, t: Test): { socket: Socket; received: () => Buffer } {
  const socket = connect(port, "127.0.0.1");
  t.teardown(() => socket.destroy());
  let answer = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => (answer = Buffer.concat([answer, chunk])));
  return { socket, received: () => answer };
}

/** A WebSocket handshake for /ws with `token`, written as a client's raw bytes. */
function handshake(token: string): string {
  return (
    `GET /ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nUpgrade: websocket\r\n` +
    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
    "Sec-WebSocket-Version: 13\r\n\r\n"
  );
}

/** Starts `upstream` on port 0 and a gatehouse of this file's routes in front of it. */
async function gatehouseBefore(upstream: Server, t: Test): Promise<TestGatehouse> {
  await new Promise<void>((done) => upstream.listen(0, "127.0.0.1", done));
  t.teardown(() => new Promise<void>((done) => upstream.close(() => done())));
  const port = (upstream.address() as AddressInfo).port;
  const other = await startTestGatehouse(
    configFor(`http://127.0.0.1:${port}`, `${await clientsYaml([APP])}${routes}`),
  );
  t.teardown(() => other.close());
  return other;
}

t.test("an upstream that refuses the upgrade is relayed as its answer", async (t) => {
  const refusing = createServer((_req, res) => res.end("plain"));
  refusing.on("upgrade", (_req, socket) =>
    socket.end(
      "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nnope",
    ),
  );
  const other = await gatehouseBefore(refusing, t);
  const answer = await openWs(
    `${other.url.replace("http:", "ws:")}/ws`,
    bearer(await obtainToken(other.url, APP)),
  );
  t.match(answer, { status: 403, body: "nope" });
});

/** RFC 6455 §4.2.2: the Sec-WebSocket-Accept that answers `key`. */
function acceptFor(key: string): string {
  return createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
}

t.test("an upstream's 101 that does not answer the client's key is a 502", async (t) => {
  const answers = {
    "a wrong Sec-WebSocket-Accept": `Sec-WebSocket-Accept: ${acceptFor("another key")}\r\n`,
    "no Sec-WebSocket-Accept": "",
  };
  for (const [name, accept] of Object.entries(answers)) {
    let upstreamEnded = false;
    const server = createServer((_req, res) => res.end("plain"));
    server.on("upgrade", (_req: IncomingMessage, socket: Socket) => {
      socket.on("error", () => undefined);
      socket.on("end", () => (upstreamEnded = true));
      t.teardown(() => socket.destroy());
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n${accept}\r\n`,
      );
    });
    const other = await gatehouseBefore(server, t);
    const answer = await openWs(
      `${other.url.replace("http:", "ws:")}/ws`,
      bearer(await obtainToken(other.url, APP)),
    );
    t.match(answer, { status: 502 }, `${name}: 502`);
    if ("body" in answer) t.match(JSON.parse(answer.body), { error: "bad_gateway" });
    t.ok(await eventually(() => upstreamEnded), `${name}: the upstream's connection is closed`);
    t.equal(
      await metric(other, "gatehouse_upstream_failures_total", { reason: "bad_response" }),
      1,
      `${name}: counted as a bad response`,
    );
    t.match(await other.logged((line) => line.path === "/ws"), { status: 502 }, `${name}: logged`);
  }
});

t.test("a handshake with a body is refused 400 and never reaches the upstream", async (t) => {
  const token = await obtainToken(g.url, APP);
  const before = upstream.handshakes.length;
  const bodies = {
    "Content-Length": "Content-Length: 5\r\n\r\nhello",
    "Transfer-Encoding": "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
  };
  for (const [name, rest] of Object.entries(bodies)) {
    const { socket, received } = rawClient(g.port, t);
    let ended = false;
    socket.on("end", () => (ended = true));
    socket.write(handshake(token).replace(/\r\n\r\n$/, `\r\n${rest}`));
    t.ok(await eventually(() => ended), `${name}: the connection closes after the answer`);
    const answer = received().toString("latin1");
    t.match(answer, /^HTTP\/1\.1 400 /, `${name}: 400`);
    t.match(
      JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)),
      { error: "invalid_request" },
      `${name}: invalid_request`,
    );
  }
  t.equal(upstream.handshakes.length, before, "nothing forwarded");
  const empty = rawClient(g.port, t);
  empty.socket.write(handshake(token).replace(/\r\n\r\n$/, "\r\nContent-Length: 0\r\n\r\n"));
  t.ok(
    await eventually(() => empty.received().toString("latin1").startsWith("HTTP/1.1 101 ")),
    "Content-Length: 0 is no body: the connection is switched",
  );
});

t.test(
  "an upstream's garbage after its 101 is relayed as it came; the client leaving ends both",
  async (t) => {
    // A valid 101, then a frame header that announces 2^62 bytes, four of them, and silence.
    const garbage = Buffer.from([0x82, 0x7f, 0x40, 0, 0, 0, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef]);
    let upstreamEnded = false;
    const server = createServer((_req, res) => res.end("plain"));
    server.on("upgrade", (req: IncomingMessage, socket: Socket) => {
      const accept = acceptFor(String(req.headers["sec-websocket-key"]));
      socket.on("error", () => undefined);
      socket.on("end", () => (upstreamEnded = true));
      t.teardown(() => socket.destroy());
      socket.write(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
          `Sec-WebSocket-Accept: ${accept}\r\n\r\n`,
      );
      socket.write(garbage);
    });
    const other = await gatehouseBefore(server, t);
    const token = await obtainToken(other.url, APP);

    const { socket: client, received } = rawClient(other.port, t);
    client.write(handshake(token));
    t.ok(
      await eventually(() => received().includes(garbage)),
      "the bytes reach the client untouched",
    );
    t.match(received().toString("latin1"), /^HTTP\/1\.1 101 Switching Protocols\r\n/);
    // The client ends its half; the upstream, a node:http server's socket (half-open allowed),
    // never ends its own.
    let clientClosed = false;
    client.on("close", () => (clientClosed = true));
    client.end();
    t.ok(await eventually(() => upstreamEnded), "the client's end is passed on to the upstream");
    t.ok(await eventually(() => clientClosed), "gatehouse closes the connection within 5 s");
    const line = await other.logged((entry) => entry.status === 101);
    t.match(
      line,
      { closedBy: "client", closeReason: "connection_closed", bytesOut: garbage.length },
      "what passed is counted",
    );
    t.equal(await metric(other, "gatehouse_websocket_connections", { route: "/ws" }), 0);
    const after = await fetch(`${other.url}/plain`);
    t.equal(after.status, 200, "gatehouse goes on serving");
  },
);

/** A GET of `path` with `fields`, on a connection of its own; the whole answer as text. */
function fetchRaw(port: number, path: string, fields: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")));
    socket.on("end", () => resolve(answer));
    socket.on("error", reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n${fields}Connection: Upgrade, close\r\n\r\n`);
  });
}

t.test("bytes sent with the handshake are relayed, counted and followed as frames", async (t) => {
  const token = await obtainToken(g.url, APP);
  const { socket, received } = rawClient(g.port, t);
  // A masked text frame "hi" (RFC 6455 §5.2) in the same write as the handshake.
  const mask = Buffer.from([1, 2, 3, 4]);
  const payload = Buffer.from("hi").map((byte, i) => byte ^ (mask[i % 4] as number));
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | 2]), mask, payload]);
  socket.write(Buffer.concat([Buffer.from(handshake(token)), frame]));
  const echoed = Buffer.from([0x81, 2, ...Buffer.from("hi")]);
  t.ok(
    await eventually(() => received().includes(echoed)),
    "the upstream echoed the frame sent with the handshake",
  );
  t.match(received().toString("latin1"), /^HTTP\/1\.1 101 Switching Protocols\r\n/);
  // The client's close frame (masked, no payload) follows: both frames are counted as bytes in.
  socket.end(Buffer.from([0x88, 0x80, 0, 0, 0, 0]));
  const id = /\r\nx-request-id: ([0-9a-f]+)\r\n/.exec(received().toString("latin1"))?.[1];
  const line = await g.logged((entry) => entry.requestId === id);
  t.match(line, { status: 101, closedBy: "client", bytesIn: frame.length + 6 });
});
