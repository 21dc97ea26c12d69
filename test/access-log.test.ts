import { closeSync, openSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import type { Clock } from "../src/clock.js";
import {
  BufferedLines,
  createAccessLog,
  createLogger,
  LOG_BUFFER_BYTES,
  LOG_FLUSH_MS,
} from "../src/log.js";
import { memoryLogger } from "./helpers/gatehouse.js";
import { manualClock } from "./helpers/clock.js";

// Access lines are formatted without pino's serialiser; they must still be valid JSON lines in
// pino's shape, whatever the values hold.
const fields = {
  requestId: "abc-1",
  traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
  spanId: "00f067aa0ba902b7",
  method: "GET",
  path: "/v1/items",
  route: "/v1/items",
  status: 200,
  durationMs: 1.25,
  upstreamMs: 0.5,
  clientId: "reporting-app",
  issuer: undefined,
  decision: "allowed",
  reason: "bearer_expired",
  websocket: undefined,
};

t.test("a line has pino's shape and every field", async (t) => {
  const { log, logs } = memoryLogger();
  createAccessLog(log).write(fields);
  t.equal(logs.length, 1);
  t.match(logs[0], { level: "info", service: "gatehouse", msg: "request", ...fields });
  t.match(logs[0]?.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

t.test("undefined fields are left out", async (t) => {
  const { log, logs } = memoryLogger();
  createAccessLog(log).write({
    ...fields,
    method: undefined,
    upstreamMs: undefined,
    clientId: undefined,
    reason: undefined,
  });
  t.notOk("method" in (logs[0] ?? {}));
  t.notOk("upstreamMs" in (logs[0] ?? {}));
  t.notOk("clientId" in (logs[0] ?? {}));
  t.notOk("reason" in (logs[0] ?? {}), "no reason where nothing was refused");
});

t.test("quotes, backslashes and control characters stay inside their string", async (t) => {
  const { log, logs } = memoryLogger();
  const hostile = 'a"b\\c\nd\u0000e\u2028f';
  createAccessLog(log).write({ ...fields, path: hostile, requestId: hostile });
  t.equal(logs[0]?.path, hostile);
  t.equal(logs[0]?.requestId, hostile);
});

t.test("nothing is written above the info level", async (t) => {
  const { log, logs } = memoryLogger();
  log.level = "warn";
  createAccessLog(log).write(fields);
  t.equal(logs.length, 0);
});

/** BufferedLines writing to a new temporary file, removed after the test, on `clock`. */
async function fileOutput(
  t: Test,
  clock: Clock = manualClock(),
): Promise<{ file: string; out: BufferedLines }> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-log-"));
  const file = join(dir, "out.log");
  const fd = openSync(file, "w");
  t.teardown(async () => {
    closeSync(fd);
    await rm(dir, { recursive: true, force: true });
  });
  return { file, out: new BufferedLines(fd, clock) };
}

t.test(
  "standard output: access lines wait for 16 KiB or a second; other lines go at once",
  async (t) => {
    const clock = manualClock();
    const { file, out } = await fileOutput(t, clock);
    const log = createLogger("info", out);
    const access = createAccessLog(log);
    const written = () => readFileSync(file, "utf8").split("\n").filter(Boolean);

    access.write(fields);
    t.equal(written().length, 0, "an access line waits");
    log.warn("an event");
    t.strictSame(
      written().map((line) => (JSON.parse(line) as { msg: string }).msg),
      ["request", "an event"],
      "an event line goes at once, after the access lines before it",
    );

    const sizeBefore = statSync(file).size;
    let lines = 0;
    while (statSync(file).size === sizeBefore) {
      access.write(fields);
      lines++;
    }
    t.ok(statSync(file).size - sizeBefore >= LOG_BUFFER_BYTES, "a full buffer goes at once");
    t.ok(lines > 1, "after many lines");

    access.write(fields);
    const count = written().length;
    clock.advance(LOG_FLUSH_MS - 1);
    t.equal(written().length, count, "a waiting line waits until its second is up");
    clock.advance(1);
    t.equal(written().length, count + 1, "a waiting line is written within a second");
    access.write(fields);
    await new Promise<void>((done) => log.flush(() => done()));
    t.equal(written().length, count + 2, "flush writes what waits");
  },
);

t.test(
  "multi-byte characters and a line too long for the buffer keep their bytes and order",
  async (t) => {
    const { file, out } = await fileOutput(t);
    const lines = ["first é 😀\n", `${"€".repeat(LOG_BUFFER_BYTES)}\n`, "last ✓\n"];
    for (const line of lines) out.buffer(line);
    out.flush();
    t.equal(readFileSync(file, "utf8"), lines.join(""));
  },
);

t.test("an output that fails loses lines, not the process", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-log-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, "out.log");
  writeFileSync(file, "");
  const fd = openSync(file, "r");
  const out = new BufferedLines(fd, manualClock());
  t.doesNotThrow(() => out.write("a line nobody can write\n"));
  closeSync(fd);
});
