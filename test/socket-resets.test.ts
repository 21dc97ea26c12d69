/**
 * A reset or FIN from a client, at any byte and in any state of its connection, ends that
 * connection only. Node drops its own listeners from a socket it hands over at `upgrade`; before
 * gatehouse owned such sockets from accept to close, one reset after a refused WebSocket handshake
 * (or on a plain request with Upgrade, pipelined behind a slow one) ended the whole process. The
 * process here is the test's own, so a socket error without a listener fails the test.
 */
import t from "tap";
import { connect, type Socket } from "node:net";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { eventually, send } from "./helpers/client.js";
import { startUpstream } from "./helpers/upstream.js";
import { startWsUpstream } from "./helpers/websocket.js";

const HANDSHAKE =
  "GET /ws HTTP/1.1\r\nHost: gatehouse.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

const wsUpstream = await startWsUpstream();
t.teardown(() => wsUpstream.close());
// Slow on /slow, so that a request pipelined behind it waits with its connection taken.
const upstream = await startUpstream((req, res) => {
  if (req.url === "/slow") setTimeout(() => res.end("slow"), 150);
  else res.end("fast");
});
t.teardown(() => upstream.close());

const wsGate = await startTestGatehouse(
  configFor(
    wsUpstream.url,
    `routes:
  - path: /ws
    methods: [GET]
    auth: bearer
    websocket: true
`,
  ),
);
t.teardown(() => wsGate.close());

const plainGate = await startTestGatehouse(
  configFor(
    upstream.url,
    `plans:
  anonymous:
    rate_limit: { limit: 100000, window: 1h }
routes:
  - path: /slow
    methods: [GET]
    auth: none
  - path: /fast
    methods: [GET]
    auth: none
`,
  ),
);
t.teardown(() => plainGate.close());

/** Writes `bytes` to `port`, then resets the connection `afterMs` later (or on the first byte back). */
function resetAfter(port: number, bytes: string, afterMs: number | "answer"): Promise<void> {
  return new Promise((done) => {
    const socket: Socket = connect(port, "127.0.0.1", () => {
      socket.write(bytes);
      if (afterMs !== "answer") setTimeout(() => socket.resetAndDestroy(), afterMs);
    });
    socket.on("data", () => {
      if (afterMs === "answer") socket.resetAndDestroy();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => done());
  });
}

const errors: unknown[] = [];
const onUncaught = (error: unknown): void => void errors.push(error);
process.on("uncaughtException", onUncaught);
t.teardown(() => void process.removeListener("uncaughtException", onUncaught));

t.test("a refused WebSocket handshake, reset at every moment around its answer", async (t) => {
  for (const when of ["answer", 0, 1, 2, 5, 20] as const) {
    for (let i = 0; i < 5; i++) await resetAfter(wsGate.port, HANDSHAKE, when);
  }
  // Cut short inside the head, too: the parser's state, not the taken socket's.
  for (let cut = 1; cut < HANDSHAKE.length; cut += 17) {
    await resetAfter(wsGate.port, HANDSHAKE.slice(0, cut), 0);
  }
  t.same(errors, [], "no socket error reached the process");
  t.equal((await send(`${wsGate.url}/healthz`)).status, 200, "gatehouse still answers");
});

t.test("a plain request with Upgrade behind a slow one, reset while it waits", async (t) => {
  const pipelined =
    "GET /slow HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n" +
    "GET /fast HTTP/1.1\r\nHost: gatehouse.test\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n";
  for (const when of [0, 10, 50, 100, "answer"] as const) {
    for (let i = 0; i < 3; i++) await resetAfter(plainGate.port, pipelined, when);
  }
  t.same(errors, [], "no socket error reached the process");
  t.equal((await send(`${plainGate.url}/fast`)).status, 200, "gatehouse still answers");
});

t.test(
  "a handed-back connection gains no listener, however many Upgrades it carries",
  async (t) => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on("warning", onWarning);
    t.teardown(() => void process.removeListener("warning", onWarning));
    const count = 2_000;
    const one =
      "GET /fast HTTP/1.1\r\nHost: gatehouse.test\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n";
    const socket = connect(plainGate.port, "127.0.0.1");
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    const answers = (): number => text.split("HTTP/1.1 200 ").length - 1;
    // In batches, each sent once the one before is answered: served one at a time, in order.
    for (let sent = 0; sent < count; sent += 100) {
      socket.write(one.repeat(100));
      if (!(await eventually(() => answers() >= sent + 100))) break;
    }
    t.equal(answers(), count, "every request answered, as plain HTTP");
    const closed = new Promise<void>((done) => socket.on("close", () => done()));
    socket.end();
    await closed;
    await new Promise((done) => setImmediate(done));
    const leaks = warnings.filter((warning) => warning.name === "MaxListenersExceededWarning");
    t.same(
      leaks.map((warning) => warning.message),
      [],
      "no emitter gained listener after listener",
    );
    t.same(errors, []);
  },
);
