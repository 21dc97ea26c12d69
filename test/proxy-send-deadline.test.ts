/**
 * The send deadline, nginx's `send_timeout`: a client that asks for a large answer and then takes
 * none of it has its connection closed after SEND_STALLS looks SEND_CHECK_MS apart, and the
 * upstream exchange it held back ends with it; a client that reads, however slowly, keeps its
 * connection. Time is the test's own.
 */
import t, { type Test } from "tap";
import { request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import {
  startOnTestClock,
  type ClockedGatehouse,
  type TestGatehouse,
} from "./helpers/gatehouse.js";
import { eventually, untilHeldBack } from "./helpers/client.js";
import { startUpstream } from "./helpers/upstream.js";
import { SEND_CHECK_MS, SEND_STALLS } from "../src/http/send-deadline.js";

const MiB = 1024 * 1024;
const chunk = Buffer.alloc(64 * 1024, 0x61);

/** The upstream's one streaming answer: how much it wrote, and whether it ended or was cut. */
const stream = { written: 0, finished: false, closed: false };
const upstream = await startUpstream((req: IncomingMessage, res: ServerResponse) => {
  if (req.url !== "/big") return void res.end("small");
  Object.assign(stream, { written: 0, finished: false, closed: false });
  const total = 256 * MiB;
  res.on("finish", () => (stream.finished = true));
  res.on("close", () => (stream.closed = true));
  res.writeHead(200, { "content-length": String(total) });
  const more = (): void => {
    while (stream.written < total && !res.destroyed) {
      stream.written += chunk.length;
      if (!res.write(chunk)) return void res.once("drain", more);
    }
    res.end();
  };
  more();
});
t.teardown(() => upstream.close());

function gatehouse(t: Test): Promise<ClockedGatehouse> {
  return startOnTestClock(
    t,
    `upstream:
  url: ${upstream.url}
  timeout: 10s
shutdown:
  grace: 2s
plans:
  anonymous:
    rate_limit: { limit: 100000, window: 1h }
routes:
  - path: /big
    methods: [GET]
    auth: none
  - path: /small
    methods: [GET]
    auth: none
`,
  );
}

/** Asks for /big and reads nothing of it. */
async function stalledClient(g: TestGatehouse): Promise<IncomingMessage> {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    httpRequest(`${g.url}/big`, resolve).on("error", reject).end();
  });
  response.pause();
  response.on("error", () => undefined);
  await untilHeldBack(`${g.url}/small`, () => stream.written);
  return response;
}

t.test("a client that takes none of its answer is closed, and the upstream's is cut", async (t) => {
  const { g, advance } = await gatehouse(t);
  const response = await stalledClient(g);
  // The first look notes where the sending stands; SEND_STALLS more without progress close it.
  for (let look = 0; look < SEND_STALLS; look++) advance(SEND_CHECK_MS);
  await new Promise((done) => setTimeout(done, 100));
  t.notOk(stream.closed, "not before the last look");
  advance(SEND_CHECK_MS);
  t.ok(await eventually(() => stream.closed), "the upstream's answer is cut");
  t.notOk(stream.finished, "and never finished");
  // The client, reading again, finds its answer cut short.
  let received = 0;
  response.on("data", (data: Buffer) => (received += data.length));
  const ended = await new Promise<string>((done) => {
    const settled = (): void => done(response.complete ? "end" : "cut");
    if (response.destroyed) settled();
    response.on("close", settled);
    response.resume();
  });
  t.equal(ended, "cut", "the client's connection was closed under its answer");
  t.ok(received < 256 * MiB, `it got ${received} bytes of its answer, not all`);
});

t.test("a client that reads, however slowly, keeps its connection", async (t) => {
  const { g, advance } = await gatehouse(t);
  const response = await stalledClient(g);
  let cut = false;
  response.socket.on("close", () => (cut = true));
  let received = 0;
  response.on("data", (data: Buffer) => (received += data.length));
  response.pause();
  for (let look = 0; look < 3 * SEND_STALLS; look++) {
    // A little is taken between two looks: gatehouse's writes move on.
    const before = received;
    response.resume();
    await eventually(() => received > before + MiB);
    response.pause();
    advance(SEND_CHECK_MS);
  }
  await new Promise((done) => setTimeout(done, 100));
  t.notOk(cut, "still open after three times the deadline");
  response.destroy();
});
