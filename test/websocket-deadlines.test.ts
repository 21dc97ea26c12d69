/**
 * Every state of a WebSocket connection has a deadline, and its closing follows RFC 6455 §7.1.1:
 * a refused handshake's connection ends LINGER_MS after its answer whatever the client does; a
 * client that ends its half while its handshake waits for the 101 ends the upstream exchange and
 * gives back its connection slot at once; gatehouse's close frame waits for the peer's before the
 * FIN; a side never gets a second close frame; a close frame left unanswered ends the connection
 * CLOSING_MS later. Time is the test's own, so nothing here waits for a deadline to pass.
 */
import t, { type Test } from "tap";
import type { Socket } from "node:net";
import {
  startOnTestClock,
  type ClockedGatehouse,
  type TestGatehouse,
} from "./helpers/gatehouse.js";
import { eventually } from "./helpers/client.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { startRawUpstream, type RawExchange } from "./helpers/raw-upstream.js";
import {
  acceptHandshake,
  closeFrameOf,
  frame,
  rawHandshake,
  startHandshake,
  type FrameReader,
} from "./helpers/raw-websocket.js";
import { LINGER_MS } from "../src/http/taken-socket.js";
import { CLOSING_MS } from "../src/websocket/relay.js";

const APP = { id: "dashboard", secret: "5d41402abc4b2a76b9719d911017c592" };
const START = Date.UTC(2026, 0, 5, 12);

/** What the upstream did with each handshake: its reader once accepted, or its socket. */
const upstreamSide: Array<{ exchange: RawExchange; reader: FrameReader | undefined }> = [];
/** Whether the upstream answers the next handshakes. */
let answering = true;
const upstream = await startRawUpstream((exchange) => {
  upstreamSide.push({ exchange, reader: answering ? acceptHandshake(exchange) : undefined });
});
t.teardown(() => upstream.close());
t.beforeEach(() => {
  upstreamSide.length = 0;
  answering = true;
});

/** A gatehouse on a clock of the test's own. */
async function gatehouse(t: Test): Promise<ClockedGatehouse> {
  return startOnTestClock(
    t,
    `upstream:
  url: ${upstream.url}
  timeout: 10m
  websocket:
    idle_timeout: 1m
shutdown:
  grace: 2s
tokens:
  ttl: 10m
${await clientsYaml([APP])}plans:
  anonymous:
    rate_limit: { limit: 1000, window: 1h }
    connections: 1
routes:
  - path: /ws
    methods: [GET]
    websocket: true
  - path: /open
    methods: [GET]
    auth: none
    websocket: true
`,
    START,
  );
}

/** Resolves once `socket` has closed, writing a byte now and then so a gone peer answers RST. */
function untilGone(socket: Socket): Promise<boolean> {
  return eventually(() => {
    if (!socket.destroyed) socket.write("x");
    return socket.destroyed;
  });
}

/** Lets the event loop turn, so that whatever was going to arrive by now has. */
const settle = (): Promise<void> => new Promise((done) => setTimeout(done, 100));

t.test("a refused handshake's connection ends LINGER_MS after its answer", async (t) => {
  const { advance, g } = await gatehouse(t);
  const refused = await rawHandshake(g.port, "/ws");
  t.match(refused.head, /^HTTP\/1\.1 401 /, "no token: 401");
  refused.socket.on("error", () => undefined);
  await settle();
  advance(LINGER_MS - 1);
  await settle();
  t.notOk(refused.socket.destroyed, "the client may read its answer for a while");
  advance(1);
  t.ok(
    await untilGone(refused.socket),
    "then the connection is gone, though the client never closed it",
  );
});

t.test("a client's FIN while its handshake waits for the 101 ends the exchange", async (t) => {
  const { g } = await gatehouse(t);
  answering = false;
  const { socket: client, answered } = startHandshake(g.port, "/open");
  void answered.catch(() => undefined);
  t.ok(await eventually(() => upstreamSide.length === 1), "the handshake reached the upstream");
  const upstreamSocket = (upstreamSide[0] as { exchange: RawExchange }).exchange.socket;
  // The client gives up: only its FIN, never a reset.
  client.end();
  t.ok(
    await eventually(() => upstreamSocket.destroyed),
    "the upstream connection is closed, long before upstream.timeout",
  );
  answering = true;
  const next = await rawHandshake(g.port, "/open");
  t.match(next.head, /^HTTP\/1\.1 101 /, "its connection slot was given back");
  next.socket.destroy();
});

/** An open connection with a token, with both sides' readers. */
async function opened(g: TestGatehouse) {
  const token = await obtainToken(g.url, APP);
  const client = await rawHandshake(g.port, "/ws", { authorization: `Bearer ${token}` });
  if (!client.head.startsWith("HTTP/1.1 101 ")) throw new Error(client.head);
  const upstreamReader = (upstreamSide.at(-1) as { reader: FrameReader }).reader;
  return {
    client,
    upstreamReader,
    upstreamSocket: (upstreamSide.at(-1) as { exchange: RawExchange }).exchange.socket,
  };
}

t.test("gatehouse's close frame waits for the peer's before the FIN", async (t) => {
  const { g, advance } = await gatehouse(t);
  const { client, upstreamReader } = await opened(g);
  advance(60_000);
  t.ok(await eventually(() => client.reader.closes.length === 1), "the client got a close frame");
  t.same(client.reader.closes, [1001], "idle: 1001");
  t.ok(await eventually(() => upstreamReader.closes.length === 1), "so did the upstream");
  await settle();
  t.notOk(client.reader.ended, "no FIN before the client's own close frame");
  client.socket.write(closeFrameOf(1001, true));
  t.ok(await eventually(() => client.reader.ended), "the FIN follows the client's close frame");
  // The upstream never answered its close frame: CLOSING_MS ends its connection.
  advance(CLOSING_MS);
  client.socket.destroy();
});

t.test("a side never gets a second close frame", async (t) => {
  const { g, advance } = await gatehouse(t);
  const { client, upstreamReader, upstreamSocket } = await opened(g);
  // Kept busy until 3 s before the token ends (its exp, 10 min, plus the 30 s clock tolerance).
  for (let step = 1; step <= 12; step++) {
    advance(50_000);
    client.socket.write(frame(0x1, Buffer.from("ping"), true));
    await eventually(() => upstreamReader.frames.length === step);
  }
  advance(27_000);
  // The client closes; before the upstream answers, and within CLOSING_MS, the token ends.
  client.socket.write(closeFrameOf(1000, true));
  t.ok(await eventually(() => upstreamReader.closes.length === 1), "relayed to the upstream");
  advance(4_000);
  t.ok(await eventually(() => client.reader.closes.length === 1), "the client's close is answered");
  // The upstream's answer to the client's close comes after gatehouse's own went to the client.
  upstreamSocket.write(closeFrameOf(1000, false));
  upstreamSocket.write(frame(0x1, Buffer.from("late"), false));
  await settle();
  t.same(client.reader.closes.length, 1, "the client got one close frame, not two");
  t.same(upstreamReader.closes, [1000], "the upstream got the client's close frame alone");
  t.same(client.reader.closes, [1008], "gatehouse's own close, for the token's end");
  t.ok(await eventually(() => client.reader.ended), "and both closes made, the client's FIN");
  advance(CLOSING_MS);
  client.socket.destroy();
});

t.test("a close frame left unanswered ends the connection CLOSING_MS later", async (t) => {
  const { g, advance } = await gatehouse(t);
  const { client, upstreamReader, upstreamSocket } = await opened(g);
  client.socket.write(closeFrameOf(1000, true));
  t.ok(await eventually(() => upstreamReader.closes.length === 1), "relayed to the upstream");
  advance(CLOSING_MS - 1);
  await settle();
  t.notOk(upstreamSocket.destroyed, "the upstream has CLOSING_MS to answer");
  advance(1);
  t.ok(await eventually(() => upstreamSocket.destroyed), "then its connection is closed");
  t.ok(await untilGone(client.socket), "and the client's");
});
