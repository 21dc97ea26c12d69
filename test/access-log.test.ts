import t from "tap";
import { createAccessLog } from "../src/log.js";
import { memoryLogger } from "./helpers/gatehouse.js";

// Access lines are formatted without pino's serialiser; they must still be valid JSON lines in
// pino's shape, whatever the values hold.
const fields = {
  requestId: "abc-1",
  method: "GET",
  path: "/v1/items",
  route: "/v1/items",
  status: 200,
  durationMs: 1.25,
  upstreamMs: 0.5,
  clientId: "reporting-app",
  decision: "allowed",
};

t.test("a line has pino's shape and every field", async (t) => {
  const { log, logs } = memoryLogger();
  createAccessLog(log).write(fields);
  t.equal(logs.length, 1);
  t.match(logs[0], { level: 30, service: "gatehouse", msg: "request", ...fields });
  t.match(logs[0]?.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

t.test("undefined fields are left out", async (t) => {
  const { log, logs } = memoryLogger();
  createAccessLog(log).write({
    ...fields,
    method: undefined,
    upstreamMs: undefined,
    clientId: undefined,
  });
  t.notOk("method" in (logs[0] ?? {}));
  t.notOk("upstreamMs" in (logs[0] ?? {}));
  t.notOk("clientId" in (logs[0] ?? {}));
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
