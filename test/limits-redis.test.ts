// The Redis store against a real redis-server of the test's own: replicas sharing one limit, and
// each on_outage policy when Redis is down, stalled or absent at start, with recovery.
import { randomBytes } from "node:crypto";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { startTestRedis, type TestRedis } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";
import { metric, scrape } from "./helpers/metrics.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const ROUTES = `routes:
  - path: /open
    methods: [GET]
    auth: none
`;

interface StoreOptions {
  readonly url: string;
  readonly onOutage?: "local" | "open" | "closed";
  readonly prefix?: string;
  readonly plan?: string;
  /**
   * `redis.timeout`: generous unless a test is about a stall, so that a loaded machine never
   * turns a slow answer into a fallback the test did not ask for.
   */
  readonly timeout?: string;
}

function config(options: StoreOptions): string {
  const prefix = options.prefix ?? `gatehouse-test-${randomBytes(6).toString("hex")}:`;
  const plan = options.plan ?? "rate_limit: { limit: 2, window: 1m }";
  return configFor(
    upstream.url,
    `plans:
  anonymous:
    ${plan}
limits:
  store: redis
  redis:
    url: ${options.url}
    key_prefix: "${prefix}"
    timeout: ${options.timeout ?? "10s"}
    on_outage: ${options.onOutage ?? "local"}
${ROUTES}`,
  );
}

async function get(g: TestGatehouse, path = "/open"): Promise<Response> {
  const response = await fetch(`${g.url}${path}`);
  await response.arrayBuffer();
  return response;
}

// Every count of the test went to Redis: none fell back, none failed.
async function noFallback(t: Test, g: TestGatehouse): Promise<void> {
  t.equal(await metric(g, "gatehouse_limiter_fallbacks_total"), 0, "nothing fell back");
  t.notMatch(await scrape(g), /^gatehouse_limiter_store_errors_total\{/m, "nothing failed");
}

async function withRedis(t: Test): Promise<TestRedis> {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  return redis;
}

async function started(t: Test, yaml: string): Promise<TestGatehouse> {
  const g = await startTestGatehouse(yaml);
  t.teardown(() => g.close());
  return g;
}

// Redis answers once the store has connected and its first PING came back.
async function connected(g: TestGatehouse): Promise<boolean> {
  return eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 1);
}

t.test("two replicas sharing one Redis enforce one combined limit, atomically", async (t) => {
  const redis = await withRedis(t);
  const yaml = config({ url: redis.url, plan: "rate_limit: { limit: 10, window: 1m }" });
  const a = await started(t, yaml);
  const b = await started(t, yaml);
  t.ok(await connected(a), "replica a connected");
  t.ok(await connected(b), "replica b connected");
  const before = upstream.received.length;
  const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => get(i % 2 === 0 ? a : b)));
  const statuses = answers.map((response) => response.status);
  t.equal(statuses.filter((status) => status === 200).length, 10, "exactly the limit passes");
  t.equal(statuses.filter((status) => status === 429).length, 40, "every other one is refused");
  t.equal(upstream.received.length - before, 10, "only the allowed ones were forwarded");
  const remaining = answers
    .filter((response) => response.status === 200)
    .map((response) => Number(response.headers.get("x-ratelimit-remaining")))
    .sort((x, y) => x - y);
  t.same(remaining, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "each allowed request saw its own count");
  for (const g of [a, b]) await noFallback(t, g);
});

t.test("a quota is shared too, and a 429 from one replica consumed nothing", async (t) => {
  const redis = await withRedis(t);
  const yaml = config({ url: redis.url, plan: "quota: { limit: 3, period: day }" });
  const a = await started(t, yaml);
  const b = await started(t, yaml);
  t.ok(await connected(a));
  t.ok(await connected(b));
  const seen: string[] = [];
  for (const g of [a, b, a, b, a]) {
    const response = await get(g);
    seen.push(`${response.status}:${response.headers.get("x-request-quota-limit-remaining")}`);
  }
  t.same(seen, ["200:2", "200:1", "200:0", "429:0", "429:0"]);
  for (const g of [a, b]) await noFallback(t, g);
});

t.test("on_outage local: counted in memory while Redis is down, shared again after", async (t) => {
  const redis = await withRedis(t);
  const g = await started(t, config({ url: redis.url, onOutage: "local" }));
  t.ok(await connected(g));
  t.equal((await get(g)).status, 200, "counted in Redis");
  await redis.kill();
  t.ok(
    await eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 0),
    "the store notices",
  );
  const during = [await get(g), await get(g), await get(g)];
  t.same(
    during.map((response) => response.status),
    [200, 200, 429],
    "the plan's limit, counted in this replica's memory",
  );
  t.equal(during[0]?.headers.get("x-ratelimit-limit"), "2", "limit headers stay");
  t.ok((await metric(g, "gatehouse_limiter_fallbacks_total")) >= 3, "fallbacks are counted");
  t.equal((await fetch(`${g.url}/readyz`)).status, 200, "still ready");
  await redis.restart();
  t.ok(await connected(g), "reconnects by itself");
  const fallbacks = await metric(g, "gatehouse_limiter_fallbacks_total");
  const after = await get(g);
  t.equal(after.status, 200, "an empty Redis counts from zero");
  t.equal(after.headers.get("x-ratelimit-remaining"), "1");
  t.equal(await metric(g, "gatehouse_limiter_fallbacks_total"), fallbacks, "counted in Redis");
});

t.test("on_outage open: forwarded uncounted, without limit headers", async (t) => {
  const redis = await withRedis(t);
  const g = await started(t, config({ url: redis.url, onOutage: "open" }));
  t.ok(await connected(g));
  await redis.kill();
  const before = upstream.received.length;
  for (let i = 0; i < 4; i++) {
    const response = await get(g);
    t.equal(response.status, 200, "over the limit of 2, yet allowed");
    t.equal(response.headers.get("x-ratelimit-limit"), null, "no headers while uncounted");
  }
  t.equal(upstream.received.length - before, 4);
  t.equal(await metric(g, "gatehouse_limiter_store_errors_total", { on_outage: "open" }), 4);
  t.equal((await fetch(`${g.url}/readyz`)).status, 200, "still ready");
  t.ok(
    await eventually(async () =>
      g.logs.some((line) => /redis does not answer/.test(String(line.msg))),
    ),
    "the outage is logged once it is seen",
  );
});

t.test("on_outage closed: 503 limits_unavailable and not ready, then recovery", async (t) => {
  const redis = await withRedis(t);
  const g = await started(t, config({ url: redis.url, onOutage: "closed" }));
  t.ok(await connected(g));
  t.equal((await fetch(`${g.url}/readyz`)).status, 200);
  await redis.kill();
  const before = upstream.received.length;
  const refused = await get(g);
  t.equal(refused.status, 503);
  t.equal(refused.headers.get("retry-after"), "1");
  t.equal(refused.headers.get("x-ratelimit-limit"), null, "503s carry no limit headers");
  t.match(await (await fetch(`${g.url}/open`)).json(), {
    error: "limits_unavailable",
    message: /rate limiter/,
  });
  t.equal(upstream.received.length, before, "nothing forwarded");
  // The outage is logged when the connection's close is seen; readiness follows in the same step.
  await g.logged((line) => /redis does not answer/.test(String(line.msg)));
  t.equal((await fetch(`${g.url}/readyz`)).status, 503, "not ready once the outage is seen");
  await redis.restart();
  t.ok(
    await eventually(async () => (await fetch(`${g.url}/readyz`)).status === 200),
    "ready again",
  );
  t.equal((await get(g)).status, 200);
});

t.test("a stalled Redis costs a request at most the timeout, then on_outage", async (t) => {
  const redis = await withRedis(t);
  const g = await started(t, config({ url: redis.url, onOutage: "closed", timeout: "100ms" }));
  t.ok(await connected(g));
  redis.pause();
  t.teardown(() => redis.resume());
  t.equal((await get(g)).status, 503, "answered, not left waiting on Redis");
  // Seen within 1.5 s by design (a check every 500 ms, a stall after 1 s without an answer);
  // the test allows more, so a loaded machine does not fail it.
  t.ok(
    await eventually(async () => (await fetch(`${g.url}/readyz`)).status === 503),
    "the health check sees it",
  );
  // Once seen, the silent connection is dropped: requests fail at once instead of each
  // waiting for the timeout, and no command is sent again when Redis comes back.
  t.ok(
    await eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 0),
    "the store reports the stall",
  );
  t.equal((await get(g)).status, 503);
  redis.resume();
  t.ok(await eventually(async () => (await get(g)).status === 200), "served again");
});

t.test("Redis unreachable at start: gatehouse serves in its declared mode", async (t) => {
  const redis = await withRedis(t);
  await redis.kill();
  const closed = await started(t, config({ url: redis.url, onOutage: "closed" }));
  t.equal((await fetch(`${closed.url}/readyz`)).status, 503, "closed: not ready from the start");
  t.equal((await fetch(`${closed.url}/healthz`)).status, 200, "but alive");
  t.ok(
    await eventually(async () =>
      closed.logs.some((line) => /redis does not answer/.test(String(line.msg))),
    ),
    "the outage is logged from the start",
  );
  t.equal(await metric(closed, "gatehouse_limiter_store_up"), 0);
  t.equal((await get(closed)).status, 503);
  const local = await started(t, config({ url: redis.url, onOutage: "local" }));
  t.equal((await fetch(`${local.url}/readyz`)).status, 200, "local: ready");
  t.same(
    [(await get(local)).status, (await get(local)).status, (await get(local)).status],
    [200, 200, 429],
  );
  await redis.restart();
  t.ok(await connected(closed), "connects once Redis is there");
  t.ok(
    await eventually(async () => (await fetch(`${closed.url}/readyz`)).status === 200),
    "and turns ready",
  );
});

t.test(
  "a reload to another Redis moves the counters there; a changed limit keeps them",
  async (t) => {
    const first = await withRedis(t);
    const second = await withRedis(t);
    const prefix = `gatehouse-test-${randomBytes(6).toString("hex")}:`;
    const g = await started(t, config({ url: first.url, prefix }));
    t.ok(await connected(g));
    t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "1");
    await g.writeConfig(
      config({ url: first.url, prefix, plan: "rate_limit: { limit: 3, window: 1m }" }),
    );
    t.equal(await g.gatehouse.reload(), "success");
    t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "1", "3 - 2 counted so far");
    await g.writeConfig(config({ url: second.url, prefix }));
    t.equal(await g.gatehouse.reload(), "success");
    t.ok(await connected(g));
    t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "1", "the new Redis starts empty");
  },
);

t.test("a reload that changes only on_outage keeps the connection and the counters", async (t) => {
  const redis = await withRedis(t);
  const prefix = `gatehouse-test-${randomBytes(6).toString("hex")}:`;
  const g = await started(t, config({ url: redis.url, prefix, onOutage: "closed" }));
  t.ok(await connected(g));
  t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "1");
  await g.writeConfig(config({ url: redis.url, prefix, onOutage: "open" }));
  t.equal(await g.gatehouse.reload(), "success");
  t.equal((await fetch(`${g.url}/readyz`)).status, 200, "no reconnection, no gap");
  const next = await get(g);
  t.equal(next.status, 200);
  t.equal(next.headers.get("x-ratelimit-remaining"), "0", "counted in Redis at once");
  t.equal(await metric(g, "gatehouse_limiter_store_up"), 1);
});

t.test(
  "a reload that changes a window starts new counters; back to memory drops the gauge",
  async (t) => {
    const redis = await withRedis(t);
    const prefix = `gatehouse-test-${randomBytes(6).toString("hex")}:`;
    const hourly = "rate_limit: { limit: 2, window: 1h }";
    const g = await started(t, config({ url: redis.url, prefix, plan: hourly }));
    t.ok(await connected(g));
    t.same([(await get(g)).status, (await get(g)).status, (await get(g)).status], [200, 200, 429]);
    await g.writeConfig(config({ url: redis.url, prefix }));
    t.equal(await g.gatehouse.reload(), "success");
    const minute = await get(g);
    t.equal(minute.status, 200, "the 1m window does not inherit the hour's key and its lifetime");
    t.equal(minute.headers.get("x-ratelimit-remaining"), "1");
    t.ok(Number(minute.headers.get("x-ratelimit-reset")) <= 60);
    await g.writeConfig(configFor(upstream.url, `plans:\n  anonymous:\n    ${hourly}\n${ROUTES}`));
    t.equal(await g.gatehouse.reload(), "success");
    t.ok(Number.isNaN(await metric(g, "gatehouse_limiter_store_up")), "memory store: no gauge");
    t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "1", "memory counts anew");
  },
);
