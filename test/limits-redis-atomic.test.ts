/**
 * The Redis store's counting against a real redis-server: every limit of a request is checked and
 * committed by one script in one round trip, a refusal consumes nothing anywhere, a client refused
 * until T is refused by its replica until T without a Redis command, and what Redis counted is
 * only ever taken back in Redis.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { pino } from "pino";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { serverSettings, startTestRedis, type TestRedis } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";
import { createMetrics } from "../src/metrics.js";
import { connectRedis } from "../src/limits/redis-connection.js";
import { createRedisStore } from "../src/limits/redis-store.js";
import { systemClock } from "../src/clock.js";
import { metric } from "./helpers/metrics.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

async function withRedis(t: Test): Promise<TestRedis> {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  return redis;
}

function config(url: string, plan: string, prefix: string): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
${plan}
limits:
  store: redis
  redis:
    url: ${url}
    key_prefix: "${prefix}"
    timeout: 10s
routes:
  - path: /open
    methods: [GET]
    auth: none
    cost: 2
`,
  );
}

/**
 * Scripts Redis has run since its stats were reset (INFO commandstats; the commands a script
 * runs inside are listed too, so the scripts themselves are what is counted).
 */
async function scripts(admin: Redis): Promise<number> {
  const info = await admin.info("commandstats");
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) {
    total += Number(match[2]);
  }
  return total;
}

async function ready(t: Test, g: TestGatehouse): Promise<void> {
  t.ok(await eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 1));
}

const PLAN = `    rate_limit: { limit: 6, window: 1h }
    quota: { limit: 100, period: day }`;

t.test("one script, one round trip, per counted request; a 429 is answered locally", async (t) => {
  const redis = await withRedis(t);
  const admin = new Redis(redis.url);
  t.teardown(() => admin.quit());
  const prefix = `gh-${randomBytes(4).toString("hex")}:`;
  const g = await startTestGatehouse(config(redis.url, PLAN, prefix));
  t.teardown(() => g.close());
  await ready(t, g);
  await admin.config("RESETSTAT");

  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await fetch(`${g.url}/open`)).status);
  t.strictSame(statuses, [200, 200, 200], "6 points: three requests of cost 2");
  t.equal(await metric(g, "gatehouse_limiter_round_trips_total"), 3, "one round trip each");
  t.equal(await scripts(admin), 3, "one script per request");
  const keys = (await admin.keys(`${prefix}*`)).sort();
  t.equal(keys.length, 2, "the rate limit and the quota");
  t.ok(
    keys.every((key) => key.startsWith(`${prefix}{ip:127.0.0.1}:`)),
    "one hash tag for every key of a client",
  );

  // Ten times the limit: the first refusal asks Redis, the rest are answered by the replica.
  const before = await scripts(admin);
  const refusals: Response[] = [];
  for (let i = 0; i < 30; i++) refusals.push(await fetch(`${g.url}/open`));
  t.ok(
    refusals.every((response) => response.status === 429),
    "all refused",
  );
  t.equal(await scripts(admin), before + 1, "one Redis call for 30 refused requests");
  t.equal(await metric(g, "gatehouse_limiter_round_trips_total"), 4);
  t.equal(await metric(g, "gatehouse_limiter_local_blocks_total"), 29);
  const last = refusals.at(-1) as Response;
  t.equal(last.headers.get("x-ratelimit-remaining"), "0");
  t.equal(last.headers.get("x-request-quota-limit-remaining"), "94", "nothing was consumed");
  const retryAfter = Number(last.headers.get("retry-after"));
  t.ok(retryAfter > 3500 && retryAfter <= 3600, "Retry-After is the window's end");
  t.equal(
    Number(await admin.get(`${prefix}{ip:127.0.0.1}:rate:plan:anonymous:default:3600000`)),
    6,
    "Redis holds exactly what was allowed",
  );
});

t.test("a refusal by one limit takes nothing from the others", async (t) => {
  const redis = await withRedis(t);
  const admin = new Redis(redis.url);
  t.teardown(() => admin.quit());
  const prefix = `gh-${randomBytes(4).toString("hex")}:`;
  const g = await startTestGatehouse(
    config(
      redis.url,
      "    rate_limit: { limit: 100, window: 1h }\n    quota: { limit: 3, period: day }",
      prefix,
    ),
  );
  t.teardown(() => g.close());
  await ready(t, g);
  t.equal((await fetch(`${g.url}/open`)).status, 200);
  const refused = await fetch(`${g.url}/open`);
  t.equal(refused.status, 429, "cost 2 over the 1 quota point left");
  t.equal(refused.headers.get("x-ratelimit-remaining"), "98", "the rate limit kept its points");
  t.equal(refused.headers.get("x-request-quota-limit-remaining"), "1");
  const rateKey = `${prefix}{ip:127.0.0.1}:rate:plan:anonymous:default:3600000`;
  t.equal(Number(await admin.get(rateKey)), 2, "nothing counted, nothing refunded in Redis");
  t.equal(await metric(g, "gatehouse_limiter_fallbacks_total"), 0);
});

t.test("what Redis counted is taken back in Redis or not at all", async (t) => {
  const redis = await withRedis(t);
  const log = pino({ level: "silent" });
  const metrics = createMetrics();
  const settings = serverSettings(redis.url, { onOutage: "local" });
  const connection = connectRedis(settings, { log, metrics });
  t.teardown(() => connection.close());
  const store = createRedisStore(connection, settings, metrics, Date.now, systemClock);
  t.teardown(() => store.close());
  t.ok(await eventually(async () => connection.healthy()));
  const slots = [{ name: "auth-failures:ip:60000", limit: 5, ttlMs: 60_000 }];

  const inRedis = await store.commit("ip:192.0.2.1", slots, 1, true, Date.now());
  t.equal(inRedis.where, "store");
  await redis.kill();
  const inMemory = await store.commit("ip:192.0.2.1", slots, 1, true, Date.now());
  t.equal(inMemory.where, "fallback", "counted in the fallback during the outage");
  t.strictSame(inMemory.counts, [1]);
  // The attempt Redis counted succeeds now: its take-back cannot reach Redis and is dropped.
  await store.takeBack("ip:192.0.2.1", slots, 1, inRedis.where, Date.now());
  const read = await store.read("ip:192.0.2.1", slots, Date.now());
  t.strictSame(read.counts, [1], "the fallback gained no credit from Redis's count");
  t.equal(read.where, "fallback");
  await store.takeBack("ip:192.0.2.1", slots, 1, inMemory.where, Date.now());
  t.strictSame(
    (await store.read("ip:192.0.2.1", slots, Date.now())).counts,
    [0],
    "the fallback's own count is taken back in the fallback",
  );
});
