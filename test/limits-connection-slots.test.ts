/**
 * Open WebSocket connections per client (`plans.<name>.connections`), counted in memory and in a
 * real redis-server: a bound shared by two replicas, a slot given back at a close, a replica that
 * dies without giving its slots back, and what each `on_outage` does while Redis is gone.
 */
import { Redis } from "ioredis";
import { pino } from "pino";
import t, { type Test } from "tap";
import { createMemorySlots } from "../src/limits/connection-slots.js";
import { createRedisSlots, LEASE_MS } from "../src/limits/redis-slots.js";
import type { ConnectionSlots, SlotOutcome } from "../src/limits/counters.js";
import { connectRedis } from "../src/limits/redis-connection.js";
import type { RedisSettings } from "../src/limits/plans.js";
import { createMetrics } from "../src/metrics.js";
import { eventually } from "./helpers/client.js";
import { manualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { serverSettings, startTestRedis, type TestRedis } from "./helpers/redis.js";
import { openWs, startWsUpstream, closed, untilOpen } from "./helpers/websocket.js";

const NOW = Date.UTC(2026, 0, 5, 12);
const held = (outcome: SlotOutcome): boolean => typeof outcome === "object";

async function withRedis(t: Test): Promise<TestRedis> {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  return redis;
}

/** Slots over a connection of their own to `settings`' Redis, once it answers. */
async function redisSlots(
  t: Test,
  settings: RedisSettings,
  clock = manualClock(),
): Promise<ConnectionSlots> {
  const metrics = createMetrics();
  const connection = connectRedis(settings, { log: pino({ level: "silent" }), metrics });
  t.teardown(() => connection.close());
  const slots = createRedisSlots({ connection, settings, metrics, now: () => NOW, clock });
  t.teardown(() => slots.close());
  t.ok(await eventually(async () => connection.healthy()), "Redis answers");
  return slots;
}

t.test(
  "memory: up to the bound, then full; a release frees one, a second does nothing",
  async (t) => {
    const slots = createMemorySlots();
    const first = await slots.acquire("client:a", 2, NOW);
    const second = await slots.acquire("client:a", 2, NOW);
    t.ok(held(first) && held(second));
    t.equal(await slots.acquire("client:a", 2, NOW), "full");
    t.ok(held(await slots.acquire("client:b", 2, NOW)), "another client has its own");
    if (typeof first !== "object") throw new Error("unreachable");
    first.release();
    first.release();
    t.ok(held(await slots.acquire("client:a", 2, NOW)), "one freed");
    t.equal(await slots.acquire("client:a", 2, NOW), "full", "and only one");
  },
);

t.test("Redis: two replicas share the bound; a release frees it for either", async (t) => {
  const redis = await withRedis(t);
  const settings = serverSettings(redis.url);
  const one = await redisSlots(t, settings);
  const two = await redisSlots(t, settings);
  const first = await one.acquire("client:a", 2, NOW);
  t.ok(held(first));
  t.ok(held(await two.acquire("client:a", 2, NOW)));
  t.equal(await one.acquire("client:a", 2, NOW), "full", "the other replica's slot counts");
  t.equal(await two.acquire("client:a", 2, NOW), "full");
  if (typeof first !== "object") throw new Error("unreachable");
  first.release();
  t.ok(await eventually(async () => held(await two.acquire("client:a", 2, NOW))), "freed");
});

t.test("Redis: a replica that stops renewing frees its slots within a lease", async (t) => {
  const redis = await withRedis(t);
  const settings = serverSettings(redis.url);
  const dying = await redisSlots(t, settings);
  const living = await redisSlots(t, settings);
  t.ok(held(await dying.acquire("client:a", 1, NOW)));
  // As kill -9 would: nothing is released, nothing renewed.
  dying.close();
  t.equal(await living.acquire("client:a", 1, NOW + LEASE_MS - 1), "full", "held until then");
  t.ok(held(await living.acquire("client:a", 1, NOW + LEASE_MS)), "free once the lease ends");
});

t.test("Redis: an open connection's lease is renewed past its first end", async (t) => {
  const redis = await withRedis(t);
  const settings = serverSettings(redis.url);
  let now = NOW;
  const clock = manualClock();
  const metrics = createMetrics();
  const connection = connectRedis(settings, { log: pino({ level: "silent" }), metrics });
  t.teardown(() => connection.close());
  const renewing = createRedisSlots({ connection, settings, metrics, now: () => now, clock });
  t.teardown(() => renewing.close());
  t.ok(await eventually(async () => connection.healthy()));
  const reader = new Redis(redis.url);
  t.teardown(() => reader.disconnect());
  const key = `${settings.keyPrefix}{client:a}:connections`;
  const ends = async (): Promise<number> =>
    Number((await reader.zrange(key, "0", "0", "WITHSCORES"))[1]);
  t.ok(held(await renewing.acquire("client:a", 1, now)));
  t.equal(await ends(), NOW + LEASE_MS, "a lease from now");
  now += LEASE_MS / 2;
  clock.advance(LEASE_MS / 2);
  // The renewal is written in the background: the lease then ends a lease after it.
  t.ok(
    await eventually(async () => (await ends()) === now + LEASE_MS),
    "renewed from the renewal's time",
  );
});

t.test("Redis gone: closed refuses, open lets it be, local counts in the process", async (t) => {
  const redis = await withRedis(t);
  const policies = ["closed", "open", "local"] as const;
  const slots = new Map<string, ConnectionSlots>();
  for (const onOutage of policies) {
    slots.set(onOutage, await redisSlots(t, serverSettings(redis.url, { onOutage })));
  }
  await redis.kill();
  const closedSlots = slots.get("closed") as ConnectionSlots;
  t.ok(
    await eventually(async () => (await closedSlots.acquire("client:a", 1, NOW)) === "unavailable"),
    "closed: unavailable",
  );
  const open = slots.get("open") as ConnectionSlots;
  t.ok(held(await open.acquire("client:a", 1, NOW)));
  t.ok(held(await open.acquire("client:a", 1, NOW)), "open: not counted");
  const local = slots.get("local") as ConnectionSlots;
  t.ok(held(await local.acquire("client:a", 1, NOW)));
  t.equal(await local.acquire("client:a", 1, NOW), "full", "local: counted in the process");
});

/** An anonymous WebSocket route whose plan holds one open connection, with `limits` as given. */
function oneConnection(upstreamUrl: string, limits: string): string {
  return configFor(
    upstreamUrl,
    `plans:
  anonymous:
    rate_limit: { limit: 100, window: 1h }
    connections: 1
routes:
  - path: /ws
    methods: [GET]
    auth: none
    websocket: true
limits:
${limits}`,
  );
}

t.test("through two gatehouses on one Redis: the bound holds across replicas", async (t) => {
  const redis = await withRedis(t);
  const upstream = await startWsUpstream();
  t.teardown(() => upstream.close());
  const yaml = oneConnection(
    upstream.url,
    `  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "ws-${process.pid}:"
`,
  );
  const a = await startTestGatehouse(yaml);
  t.teardown(() => a.close());
  const b = await startTestGatehouse(yaml);
  t.teardown(() => b.close());
  const ws = (g: typeof a) => `${g.url.replace("http:", "ws:")}/ws`;
  // Redis answers a while after a gatehouse starts; until then `closed` refuses every handshake.
  const first = await untilOpen(ws(a));
  const refused = await openWs(ws(b));
  t.match(refused, { status: 429 }, "the second replica refuses the same client");
  if ("body" in refused) t.match(JSON.parse(refused.body), { policy: "connections" });
  const end = closed(first);
  first.close();
  await end;
  t.ok(
    await eventually(async () => {
      const again = await openWs(ws(b));
      if (!("ws" in again)) return false;
      again.ws.close();
      return true;
    }),
    "free again on the other replica once the connection closed",
  );
});

t.test("limits.dry_run: a handshake over connections is counted and let through", async (t) => {
  const upstream = await startWsUpstream();
  t.teardown(() => upstream.close());
  const g = await startTestGatehouse(oneConnection(upstream.url, "  dry_run: true\n"));
  t.teardown(() => g.close());
  const url = `${g.url.replace("http:", "ws:")}/ws`;
  const first = await untilOpen(url);
  const second = await untilOpen(url);
  t.pass("both open");
  const labels = { refusal: "rate_limited", dry_run: "true", limit: "connections" };
  t.equal(await metric(g, "gatehouse_limit_refusals_total", labels), 1, "counted as a dry run");
  first.close();
  second.close();
});
