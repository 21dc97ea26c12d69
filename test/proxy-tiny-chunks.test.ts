/**
 * An upstream that sends its body in tiny chunks to a client that reads slowly: what gatehouse
 * holds for the exchange stays bounded, however the chunks are cut, and the body arrives whole.
 * Node's writable buffer bounds bytes, while each tiny write costs it hundreds of bytes of
 * bookkeeping, so a byte count alone let megabytes pile up per exchange.
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import t from "tap";
import { eventually, untilHeldBack } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { liveMemory } from "./helpers/memory.js";
import { startRawUpstream, type RawExchange } from "./helpers/raw-upstream.js";

const MiB = 1024 * 1024;

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET]
    auth: none
`;

const OWN = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const CHUNKED_HEAD =
  "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";

/**
 * `count` chunks of 1 to `most` bytes, framed (RFC 9112 §7.1), and the body they carry. On the
 * wire a write of many framed chunks is the same bytes as one write per chunk: what gatehouse
 * reads does not depend on how the upstream cut its writes, and the test's own upstream stays
 * cheap.
 */
function tinyChunks(count: number, most: number): { wire: Buffer; body: Buffer } {
  const wire: string[] = [];
  const body: string[] = [];
  for (let i = 0; i < count; i++) {
    const size = (i % most) + 1;
    const data = String.fromCharCode(97 + (i % 26)).repeat(size);
    wire.push(`${size.toString(16)}\r\n${data}\r\n`);
    body.push(data);
  }
  return { wire: Buffer.from(wire.join(""), "latin1"), body: Buffer.from(body.join(""), "latin1") };
}

// One-byte chunks: the most pieces for the bytes. Made once, so every write sends the same buffer.
const ONE_BYTE_CHUNKS = tinyChunks(64 * 1024, 1).wire;

/** Writes `batches` (or, without a count, batches until the socket closes), as fast as taken. */
function flood(ex: RawExchange, batch: Buffer, batches = Infinity, onWrite?: () => void): void {
  const { socket } = ex;
  socket.write(CHUNKED_HEAD);
  let left = batches;
  const more = (): void => {
    while (left > 0 && !socket.destroyed) {
      left -= 1;
      onWrite?.();
      if (!socket.write(batch)) return void socket.once("drain", more);
    }
    if (left === 0) socket.write("0\r\n\r\n");
  };
  more();
}

t.test(
  "a client that does not read while the upstream sends tiny chunks holds at most 1 MiB per exchange",
  async (t) => {
    const EXCHANGES = 4;
    let batches = 0;
    let open = 0;
    const upstream = await startRawUpstream((ex) => {
      if (ex.path !== "/v1/tiny") return void ex.socket.write(OWN);
      open += 1;
      ex.socket.on("close", () => (open -= 1));
      flood(ex, ONE_BYTE_CHUNKS, Infinity, () => (batches += 1));
    });
    const gh = await startTestGatehouse(
      configFor(upstream.url, ROUTES).replace("timeout: 2s", "timeout: 60s"),
    );
    const clients: Socket[] = [];
    t.teardown(async () => {
      for (const client of clients) client.destroy();
      await gh.close();
      await upstream.close();
    });
    for (let i = 0; i < EXCHANGES; i++) {
      const client = connect(gh.port, "127.0.0.1");
      client.pause();
      // Half of them HTTP/1.0: their answer is not chunked, so each upstream byte is one write
      // of one byte, where HTTP/1.1 adds the chunk's framing.
      client.write(`GET /v1/tiny HTTP/1.${i % 2}\r\nHost: gatehouse.test\r\n\r\n`);
      clients.push(client);
    }
    await eventually(() => open === EXCHANGES);
    t.equal(open, EXCHANGES, "every exchange is under way");
    // The most live memory seen on the way, whether gatehouse was still catching up or not.
    let most = 0;
    const statuses = await untilHeldBack(
      `${gh.url}/v1/items`,
      () => batches,
      async () => void (most = Math.max(most, await liveMemory())),
    );
    t.ok(
      statuses.every((status) => status === 200),
      "gatehouse serves meanwhile",
    );
    // What the exchanges held is what their end gives back: sockets, buffers and all.
    for (const client of clients) client.destroy();
    t.ok(await eventually(() => open === 0), "the upstream exchanges end with their clients");
    const held = most - (await liveMemory());
    t.ok(
      held < EXCHANGES * MiB,
      `at most 1 MiB per exchange (${(held / EXCHANGES / MiB).toFixed(2)} MiB each)`,
    );
  },
);

t.test("a body of tiny chunks read slowly arrives whole and in order", async (t) => {
  // Far more than the sockets on the way take, so the exchange is held back many times.
  const BATCHES = 128;
  // 12 chunks to a cycle, so batch after batch carries the same bytes.
  const { wire, body } = tinyChunks(12 * 1024, 12);
  let batches = 0;
  const upstream = await startRawUpstream((ex) => {
    if (ex.path !== "/v1/tiny") return void ex.socket.write(OWN);
    flood(ex, wire, BATCHES, () => (batches += 1));
  });
  const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
  t.teardown(async () => {
    await gh.close();
    await upstream.close();
  });
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    httpRequest(`${gh.url}/v1/tiny`, { agent: false }, resolve).on("error", reject).end();
  });
  response.pause();
  await untilHeldBack(`${gh.url}/v1/items`, () => batches);
  t.ok(batches < BATCHES, `the upstream was held back after ${batches} of ${BATCHES} writes`);
  // Then a slow reader: a little at a time, with the event loop turning in between.
  const received: Buffer[] = [];
  let closed = false;
  response.once("close", () => (closed = true));
  while (!response.readableEnded && !closed) {
    const piece = response.read(4096) as Buffer | null;
    if (piece !== null) received.push(piece);
    await new Promise((done) => setImmediate(done));
  }
  t.ok(response.complete, "the answer is complete");
  t.equal(response.statusCode, 200);
  const got = Buffer.concat(received);
  t.equal(got.length, body.length * BATCHES, "every byte arrives");
  let whole = true;
  for (let i = 0; i < BATCHES && whole; i++) {
    whole = got.subarray(i * body.length, (i + 1) * body.length).equals(body);
  }
  t.ok(whole, "in order");
});
