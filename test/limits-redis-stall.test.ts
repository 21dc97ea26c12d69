/**
 * A Redis stall costs a request at most one `redis.timeout`. A bearer request asks Redis twice:
 * for the revoked token ids (when this replica's copy is a second old) and to count its limits.
 * A redis-server of the test's own is stopped with SIGSTOP (its sockets stay open, so only
 * timeouts reveal it) while requests with gatehouse's own tokens arrive, for each `on_outage`.
 * The timeout is long (1 s) and the margin allowed for a loaded machine is well below a second
 * timeout, which is the fault guarded against: a request waiting for the lookup's timeout and then
 * for the limits'. The periodic health check is held back (its timer never fires), as it is in
 * the first second of a real stall, before it can have seen one: with the usual 100 ms timeout
 * that second is ten timeouts long, and only the timeouts reveal the stall.
 */
import { randomBytes } from "node:crypto";
import t from "tap";
import { systemClock, type Clock } from "../src/clock.js";
import { send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "a-secret-for-the-stall-tests-0123456" };
const TIMEOUT_MS = 1000;
// Less than a second timeout by far, more than a loaded machine adds to one.
const MARGIN_MS = 600;
const WAVE = 20;
// The process's clock, whose repeating timers (the Redis health check among them) never fire.
const NO_HEALTH_CHECKS: Clock = { ...systemClock, every: () => ({ cancel: () => undefined }) };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

for (const onOutage of ["local", "open", "closed"] as const) {
  t.test(`on_outage ${onOutage}: no request waits more than one timeout`, async (t) => {
    const redis = await startTestRedis();
    t.teardown(() => redis.close());
    // The wall clock of gatehouse moves with the test's: the revoked ids' copy is made stale by
    // moving it, not by waiting.
    let skew = 0;
    const g = await startTestGatehouse(
      configFor(
        upstream.url,
        `${await clientsYaml([{ ...APP, extra: ["plan: standard"] }])}
plans:
  standard:
    rate_limit: { limit: 100000, window: 1m }
limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "gatehouse-stall-${randomBytes(6).toString("hex")}:"
    timeout: ${TIMEOUT_MS}ms
    on_outage: ${onOutage}
routes:
  - path: /v1/items
    methods: [GET]
`,
      ),
      { now: () => Date.now() + skew, clock: NO_HEALTH_CHECKS },
    );
    t.teardown(() => g.close());
    t.ok(await connected(g), "Redis answers");
    const token = await obtainToken(g.url, APP);
    const timed = async () => {
      const response = await send(`${g.url}/v1/items`, {
        headers: { authorization: `Bearer ${token}` },
      });
      return { status: response.status, response };
    };
    const warm = await timed();
    t.equal(warm.status, 200, "the token is verified and the revoked ids read");
    t.equal(warm.response.headers["x-ratelimit-limit"], "100000", "counted in Redis");

    skew += 2000;
    // Requests already on their way as Redis stops, then more while it is stopped.
    const first = Array.from({ length: WAVE }, timed);
    redis.pause();
    t.teardown(() => redis.resume());
    await new Promise((done) => setTimeout(done, 200));
    const second = Array.from({ length: WAVE }, timed);
    const answers = await Promise.all([...first, ...second]);

    // What each request spent in gatehouse itself, from its access log line: the upstream's own
    // time (a server in this same busy process) is not gatehouse waiting for Redis.
    const spent = await Promise.all(
      answers.map(async ({ response }) => {
        const line = await g.logged(
          (logged) => logged.requestId === response.headers["x-request-id"] && "status" in logged,
        );
        return Number(line.durationMs) - Number(line.upstreamMs ?? 0);
      }),
    );
    const slowest = Math.max(...spent);
    t.ok(
      slowest <= TIMEOUT_MS + MARGIN_MS,
      `the slowest of ${answers.length} spent ${Math.round(slowest)} ms in gatehouse`,
    );
    const expected = onOutage === "closed" ? 503 : 200;
    t.strictSame(
      answers.map((answer) => answer.status),
      Array(answers.length).fill(expected),
      `every request: ${expected}`,
    );
    if (onOutage !== "closed") return;
    const refused = answers[0]?.response;
    t.match(JSON.parse(refused?.body.toString("utf8") ?? "{}"), { error: "limits_unavailable" });
    t.equal(refused?.headers["retry-after"], "1");
    const line = await g.logged(
      (logged) => logged.requestId === refused?.headers["x-request-id"] && "status" in logged,
    );
    t.match(line, { status: 503, route: "/v1/items", decision: "limits_unavailable" });
  });
}
