/**
 * A WebSocket peer that sends one-byte TCP segments toward a peer that does not read, either way:
 * what gatehouse holds for the connection stays bounded, and every byte arrives in order once the
 * reader reads. Node's writable buffer bounds bytes, while each tiny write costs it hundreds of
 * bytes of bookkeeping, so a byte count alone let megabytes pile up per connection.
 */
import { randomBytes } from "node:crypto";
import { subscribe } from "node:diagnostics_channel";
import type { Socket } from "node:net";
import t, { type Test } from "tap";
import { eventually, untilHeldBack } from "./helpers/client.js";
import { manualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { liveMemory } from "./helpers/memory.js";
import { startRawUpstream, type RawUpstream } from "./helpers/raw-upstream.js";
import {
  acceptHandshake,
  closeCode,
  frame,
  FrameReader,
  frameHead,
  rawHandshake,
  type Frame,
} from "./helpers/raw-websocket.js";
import { CLOSING_MS } from "../src/websocket/relay.js";

const MiB = 1024 * 1024;

const ROUTES = `routes:
  - path: /ws
    methods: [GET]
    auth: none
    websocket: true
  - path: /v1/**
    methods: [GET]
    auth: none
`;

/** No frame either way for this long, and gatehouse closes the connection. */
const IDLE_MS = 10_000;

const OWN = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/** From the upstream to the client, or from the client to the upstream. */
type Way = "out" | "in";

/** One connection through gatehouse: both ends, read by nobody until the test says so. */
interface Ends {
  readonly client: Socket;
  readonly upstream: Socket;
}

/** Every socket of the process, as Node makes it (accepted or connected), until it closes. */
const sockets = new Set<Socket>();
function track({ socket }: { socket: Socket }): void {
  sockets.add(socket);
  socket.once("close", () => sockets.delete(socket));
}
subscribe("net.server.socket", track as (message: unknown) => void);
subscribe("net.client.socket", track as (message: unknown) => void);

/** The other end of `peer`'s connection: gatehouse's socket to it. */
function otherEnd(peer: Socket): Socket {
  for (const socket of sockets) {
    if (socket.localPort === peer.remotePort && socket.remotePort === peer.localPort) return socket;
  }
  throw new Error("no socket of gatehouse's is connected to this peer");
}

/** Lets the event loop turn a while for the segments: a probe at every turn would crowd them. */
const pause = (): Promise<void> => new Promise((done) => setTimeout(done, 50));

/** Resolves once `probe` holds, looking each time the event loop turns. */
async function until(probe: () => boolean): Promise<void> {
  while (!probe()) await new Promise((done) => setImmediate(done));
}

/**
 * Fills the kernel's buffers between gatehouse and a reader that does not read, fast: `from`
 * sends `chunk(0)`, `chunk(1)`... each once gatehouse has written the last to `sink`, its socket to
 * the reader, until the kernel takes no more. From then on what gatehouse is sent, it holds, and
 * no more than one chunk waits before it. Resolves with the number of chunks sent.
 */
async function fill(from: Socket, sink: Socket, chunk: (i: number) => Buffer): Promise<number> {
  let sent = 0;
  while (sink.writableLength === 0) {
    const bytes = chunk(sent++);
    const written = sink.bytesWritten + bytes.length;
    from.write(bytes);
    await until(() => sink.bytesWritten >= written || sink.writableLength > 0);
  }
  return sent;
}

/** A payload longer than any test sends: from its head on, every byte is relayed as it comes. */
const ENDLESS = 2 ** 52;
/** Payload bytes that fill the kernel's buffers fast. */
const BULK = Buffer.alloc(16 * 1024, 0x62);

/**
 * Sends `piece(i)` for i = 0, 1, ... each in a TCP segment of its own, the next once the last has
 * left and the event loop has turned (so gatehouse reads each by itself), until `piece` returns
 * null or the socket closes. `sent` runs after each.
 */
function trickle(socket: Socket, piece: (i: number) => Buffer | null, sent: () => void): void {
  socket.setNoDelay(true);
  let i = 0;
  const next = (): void => {
    const bytes = piece(i++);
    if (bytes === null || socket.destroyed) return;
    socket.write(bytes, (error) => {
      if (error !== undefined && error !== null) return;
      sent();
      setImmediate(next);
    });
  };
  next();
}

/** A gatehouse in front of a raw upstream that answers every handshake and reads no frame. */
async function setUp(t: Test): Promise<{
  g: TestGatehouse;
  upstream: RawUpstream;
  open: () => Promise<Ends>;
  live: () => number;
  advance: (ms: number) => void;
}> {
  const waiting: Array<(socket: Socket) => void> = [];
  let live = 0;
  const upstream = await startRawUpstream((ex) => {
    if (ex.path !== "/ws") return void ex.socket.write(OWN);
    acceptHandshake(ex);
    // The handshake's reader stops here: nothing reads the upstream's side until the test does.
    ex.socket.removeAllListeners("data");
    ex.socket.pause();
    live += 1;
    ex.socket.on("close", () => (live -= 1));
    waiting.shift()?.(ex.socket);
  });
  const clock = manualClock();
  const config = configFor(upstream.url, ROUTES).replace(
    "timeout: 2s",
    `timeout: 2s\n  websocket:\n    idle_timeout: ${IDLE_MS / 1000}s`,
  );
  const g = await startTestGatehouse(config, { clock });
  // The upstream's side goes first: a connection waiting for the peers' close frames ends then,
  // where it would wait for a closing deadline on a clock that stands still.
  t.teardown(async () => {
    await upstream.close();
    await g.close();
  });
  const open = async (): Promise<Ends> => {
    const upstreamSide = new Promise<Socket>((resolve) => waiting.push(resolve));
    const opened = await rawHandshake(g.port, "/ws");
    if (!opened.head.startsWith("HTTP/1.1 101 ")) throw new Error(`refused: ${opened.head}`);
    const { socket } = opened;
    socket.removeAllListeners("data");
    socket.pause();
    return { client: socket, upstream: await upstreamSide };
  };
  return { g, upstream, open, live: () => live, advance: (ms) => clock.advance(ms) };
}

/** The sender and the reader of `way`. */
function sides(ends: Ends, way: Way): { from: Socket; to: Socket } {
  return way === "out"
    ? { from: ends.upstream, to: ends.client }
    : { from: ends.client, to: ends.upstream };
}

const ONE_BYTE = Buffer.from("x");
/**
 * One-byte segments sent after the fill, per connection: more than a paused socket's buffer
 * takes of them (its high-water mark, 64 KiB for undici's), and than Node's writable buffer does.
 */
const SEGMENTS = 80 * 1024;
/** How many segments, across the connections, between two looks at memory. */
const MEASURE_EVERY = 32 * 1024;

for (const way of ["out", "in"] as const) {
  const sender = way === "out" ? "an upstream" : "a client";
  const reader = way === "out" ? "a client" : "an upstream";
  t.test(
    `${sender} sending one-byte segments to ${reader} that does not read: at most 1 MiB held per connection`,
    async (t) => {
      const CONNECTIONS = 4;
      const { g, open, live, advance } = await setUp(t);
      const connections: Ends[] = [];
      t.teardown(() => {
        for (const ends of connections) ends.client.destroy();
      });
      let segments = 0;
      for (let i = 0; i < CONNECTIONS; i++) {
        const ends = await open();
        connections.push(ends);
        const { from, to } = sides(ends, way);
        from.write(frameHead(0x2, ENDLESS, way === "in" ? randomBytes(4) : undefined));
        await fill(from, otherEnd(to), () => BULK);
        trickle(
          from,
          (segment) => (segment < SEGMENTS ? ONE_BYTE : null),
          () => (segments += 1),
        );
      }
      // The most live memory seen on the way, looked at every MEASURE_EVERY segments (a full
      // collection stops everything for a while).
      let most = 0;
      let measured = -MEASURE_EVERY;
      const statuses = await untilHeldBack(
        `${g.url}/v1/items`,
        () => segments,
        async () => {
          await pause();
          if (segments - measured < MEASURE_EVERY && segments < CONNECTIONS * SEGMENTS) return;
          measured = segments;
          most = Math.max(most, await liveMemory());
        },
      );
      t.ok(
        statuses.every((status) => status === 200),
        "gatehouse serves meanwhile",
      );
      t.equal(live(), CONNECTIONS, "every connection is still open");
      // What the connections held is what their end gives back: sockets, buffers and all. A side
      // that cannot be sent its FIN is closed when the closing deadline passes; the upstream reads
      // from now on, so that it sees its connection end.
      for (const ends of connections) {
        ends.client.destroy();
        ends.upstream.resume();
      }
      t.ok(
        await eventually(() => {
          advance(CLOSING_MS);
          return live() === 0;
        }),
        "the upstream connections end with the clients",
      );
      const held = most - (await liveMemory());
      t.ok(
        held < CONNECTIONS * MiB,
        `at most 1 MiB per connection (${(held / CONNECTIONS / MiB).toFixed(2)} MiB each, ` +
          `${segments} segments sent)`,
      );
    },
  );
}

/** The bytes of a frame carrying `length` bytes of payload, each telling where it stands. */
function numbered(length: number, masked: boolean): { frame: Buffer; payload: Buffer } {
  const payload = Buffer.alloc(length);
  for (let i = 0; i < length; i++) payload[i] = (i * 31 + (i >> 8)) & 0xff;
  return { frame: frame(0x2, payload, masked), payload };
}

for (const way of ["out", "in"] as const) {
  const sender = way === "out" ? "an upstream" : "a client";
  const reader = way === "out" ? "the client" : "the upstream";
  t.test(
    `${sender}'s frame in segments of 1 to 12 bytes reaches ${reader} whole and in order, ` +
      "gatehouse's close frame after it",
    async (t) => {
      // More segments than gatehouse holds while the reader takes nothing, and more bytes than
      // a socket's buffer, so that every bound is met on the way.
      const TINY = 96 * 1024;
      const FILL = 16 * 1024;
      const { g, open, advance } = await setUp(t);
      const ends = await open();
      t.teardown(() => ends.client.destroy());
      const { from, to } = sides(ends, way);
      const masked = way === "in";
      const fills = await fill(from, otherEnd(to), (i) =>
        frame(0x2, Buffer.alloc(FILL, i % 256), masked),
      );
      const tiny = numbered(TINY, masked);
      let offset = 0;
      let segments = 0;
      trickle(
        from,
        (segment) => {
          if (offset === tiny.frame.length) return null;
          const piece = tiny.frame.subarray(offset, offset + (segment % 12) + 1);
          offset += piece.length;
          return piece;
        },
        () => (segments += 1),
      );
      await untilHeldBack(`${g.url}/v1/items`, () => segments, pause);
      // gatehouse closes the connection while the reader has taken nothing: its close frame goes
      // after the frame under way, and after whatever gatehouse holds.
      advance(IDLE_MS);
      const frames = new FrameReader(to);
      to.resume();
      t.ok(
        await eventually(() => frames.closes.length > 0),
        "the reader gets a close frame in the end",
      );
      t.equal(frames.frames.length, fills + 2, "every frame arrives, then the close frame");
      let whole = true;
      for (let i = 0; i < fills && whole; i++) {
        whole = (frames.frames[i] as Frame).payload.equals(Buffer.alloc(FILL, i % 256));
      }
      t.ok(whole, `the ${fills} frames that filled the buffers arrive whole, in order`);
      t.ok(
        (frames.frames[fills] as Frame).payload.equals(tiny.payload),
        "the frame sent in tiny segments arrives whole, every byte in its place",
      );
      t.equal(closeCode(frames.frames[fills + 1] as Frame), 1001, "then gatehouse's close frame");
    },
  );
}
