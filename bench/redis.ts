/**
 * `redis`: gatehouse counting in Redis. Side by side with the bare forwarder, as the other
 * scenarios: two gatehouse processes whose anonymous plan (a rate limit and a quota, never
 * reached) counts every request in a redis-server the bench starts itself. Then, from Redis's own
 * `INFO commandstats` and `INFO cpu` and gatehouse's /metrics: the Redis commands and round trips
 * per request; four gatehouse processes on the one Redis admitting exactly the limit of a client
 * sending ten times it; the Redis scripts that client costs once refused; Redis's CPU per request;
 * and the same four-process figures on a 3-primary Redis Cluster, summed over its primaries.
 */
import { Redis } from "ioredis";
import { startTestRedis } from "../test/helpers/redis.js";
import { startTestCluster } from "../test/helpers/redis-topologies.js";
import { answered, clientAddress, drive, type Driven } from "./drive.js";
import {
  configHead,
  metric,
  NEVER_REACHED,
  OPEN_ROUTE,
  startConfigured,
  table,
  type Admin,
  type LimitsContext,
} from "./limits-kit.js";
import { pin } from "./pin.js";
import {
  difference,
  infoFields,
  perRequest,
  redisStats,
  summedStats,
  type RedisStats,
} from "./redis-info.js";
import type { Served } from "./processes.js";
import { markdownSection } from "./report.js";
import type { Pairing, Skip } from "./scenarios.js";

const FLEET = 4;
const FLEET_LIMIT = 1000;
const FLEET_CONNECTIONS = 64;
// Addresses each sent fewer requests than the limit, so all of them are counted in Redis.
const COUNTED_ADDRESSES = 1000;
const COUNTED_REQUESTS = 20_000;
const SINGLE_REQUESTS = 10_000;
const HAMMERED = "203.0.113.7";
const ROUND_TRIPS = "gatehouse_limiter_round_trips_total";
const LOCAL_BLOCKS = "gatehouse_limiter_local_blocks_total";
const FALLBACKS = "gatehouse_limiter_fallbacks_total";

/**
 * The `limits:` block's lines for counting in the Redis that `where` (the `limits.redis` line
 * saying where it is) names, under `prefix`. A generous timeout and `closed`: a slow Redis turns
 * into 503s, which void the run, rather than into requests quietly counted in memory.
 */
export function redisLimits(where: string, prefix: string): string {
  return `  store: redis
  redis:
    ${where}
    key_prefix: "${prefix}"
    timeout: 1s
    on_outage: closed
`;
}

function redisConfig(
  listen: string,
  adminListen: string,
  context: LimitsContext,
  where: string,
  fleet: boolean,
): string {
  const plan = fleet
    ? `    rate_limit: { limit: ${FLEET_LIMIT}, window: 10m }\n`
    : `    rate_limit: { limit: ${NEVER_REACHED}, window: 1m }\n    quota: { limit: ${NEVER_REACHED}, period: day }\n`;
  return `${configHead(listen, adminListen, context, fleet ? ["127.0.0.1/32"] : [])}plans:
  anonymous:
${plan}limits:
${redisLimits(where, `bench-${fleet ? "fleet" : "pair"}:`)}`;
}

async function sum(admins: readonly Admin[], name: string): Promise<number> {
  const values = await Promise.all(admins.map((admin) => metric(admin, name)));
  return values.reduce((total, value) => total + value, 0);
}

/** Redis's work and the round trips and local refusals of `admins` while `work` runs. */
async function observe<T>(
  read: () => Promise<RedisStats>,
  admins: readonly Admin[],
  work: () => Promise<T>,
) {
  const stats = await read();
  const trips = await sum(admins, ROUND_TRIPS);
  const blocks = await sum(admins, LOCAL_BLOCKS);
  const fallbacks = await sum(admins, FALLBACKS);
  const result = await work();
  return {
    result,
    redis: difference(stats, await read()),
    roundTrips: (await sum(admins, ROUND_TRIPS)) - trips,
    localBlocks: (await sum(admins, LOCAL_BLOCKS)) - blocks,
    fallbacks: (await sum(admins, FALLBACKS)) - fallbacks,
  };
}

const xff = (address: string) => ({ "x-forwarded-for": address });
const ratio = (count: number, requests: number) => (count / requests).toFixed(3);

/** (b) One process: Redis commands, round trips and Redis CPU for an exact number of requests. */
async function commandsPerRequest(
  redis: Redis,
  pair: Admin,
  context: LimitsContext,
): Promise<string[][]> {
  const seen = await observe(
    () => redisStats(redis),
    [pair],
    () =>
      drive([pair.served.url + OPEN_ROUTE], SINGLE_REQUESTS, context.load.connections, () => ({})),
  );
  const faults = SINGLE_REQUESTS - answered(seen.result, 200);
  return [
    ["requests to one process", String(SINGLE_REQUESTS)],
    ["Lua scripts per request (evalsha + eval)", ratio(seen.redis.scripts, SINGLE_REQUESTS)],
    [`round trips per request (${ROUND_TRIPS})`, ratio(seen.roundTrips, SINGLE_REQUESTS)],
    ["Redis commands per request, by name", perRequest(seen.redis.calls, SINGLE_REQUESTS)],
    ["Redis CPU µs per request", (seen.redis.cpuUs / SINGLE_REQUESTS).toFixed(1)],
    ["non-200 answers, fallbacks", `${faults}, ${seen.fallbacks}`],
  ];
}

function others(driven: Driven): number {
  return (
    driven.errors +
    [...driven.statuses].reduce(
      (total, [status, count]) => total + (status === 200 || status === 429 ? 0 : count),
      0,
    )
  );
}

/**
 * (c) and (d): four processes on the Redis that `where` (the `limits.redis` line saying where it
 * is) names, `read` giving Redis's figures summed over its servers.
 */
async function fleetFigures(
  read: () => Promise<RedisStats>,
  where: string,
  context: LimitsContext,
): Promise<string[][]> {
  const fleet: Admin[] = [];
  try {
    for (let i = 1; i <= FLEET; i++) {
      fleet.push(
        await startConfigured(`gatehouse fleet ${i}`, context, (listen, adminListen) =>
          redisConfig(listen, adminListen, context, where, true),
        ),
      );
    }
    const urls = fleet.map((admin) => admin.served.url + OPEN_ROUTE);
    const sent = 10 * FLEET_LIMIT;
    const hammer = () => drive(urls, sent, FLEET_CONNECTIONS, () => xff(HAMMERED));
    const first = await observe(read, fleet, hammer);
    const again = await observe(read, fleet, hammer);
    const counted = await observe(read, fleet, () =>
      drive(urls, COUNTED_REQUESTS, FLEET_CONNECTIONS, (i) =>
        xff(clientAddress(11, i % COUNTED_ADDRESSES)),
      ),
    );
    const admitted = answered(first.result, 200);
    const refused = answered(first.result, 429);
    const refusedAgain = answered(again.result, 429);
    const countedOk = answered(counted.result, 200);
    return [
      [
        `one client at ten times its limit of ${FLEET_LIMIT}: ${sent} requests over ${FLEET} processes, admitted / refused / other`,
        `${admitted} / ${refused} / ${others(first.result)}`,
      ],
      ["combined admitted count exactly the limit", admitted === FLEET_LIMIT ? "yes" : "NO"],
      [
        "Lua scripts for those requests: for the admitted, for the refused (per refused request)",
        `${admitted}, ${first.redis.scripts - admitted} (${ratio(first.redis.scripts - admitted, refused)})`,
      ],
      [
        `the same client, ${sent} more requests once refused: refused, Lua scripts, local blocks`,
        `${refusedAgain}, ${again.redis.scripts}, ${again.localBlocks}`,
      ],
      [
        `${COUNTED_REQUESTS} counted requests (${COUNTED_ADDRESSES} clients) over ${FLEET} processes: admitted`,
        String(countedOk),
      ],
      ["  Lua scripts per request", ratio(counted.redis.scripts, COUNTED_REQUESTS)],
      ["  round trips per request", ratio(counted.roundTrips, COUNTED_REQUESTS)],
      ["  Redis CPU µs per request", (counted.redis.cpuUs / COUNTED_REQUESTS).toFixed(1)],
      ["fallbacks in all three", String(first.fallbacks + again.fallbacks + counted.fallbacks)],
    ];
  } finally {
    for (const admin of fleet) await admin.served.stop();
  }
}

/**
 * (e): the four processes on a 3-primary Redis Cluster, Redis's figures summed over the primaries;
 * a sentence saying why instead when no cluster could be started. Every node is stopped.
 */
async function clusterFigures(context: LimitsContext): Promise<string> {
  const cluster = await startTestCluster().catch((error: unknown) => error as Error);
  if (cluster instanceof Error) {
    return `Redis Cluster: not measured, no cluster could be started: ${cluster.message}`;
  }
  const nodes = cluster.ports.map((port) => new Redis({ port, host: "127.0.0.1" }));
  try {
    const read = async () => summedStats(await Promise.all(nodes.map(redisStats)));
    const where = `cluster: [${cluster.seeds.join(", ")}]`;
    const rows = await fleetFigures(read, where, context);
    return table([`${FLEET} gatehouse processes on a 3-primary Redis Cluster`, "value"], rows);
  } finally {
    for (const node of nodes) node.disconnect();
    await cluster.close();
  }
}

/**
 * Starts a redis-server of the scenario's own (on a port below the ephemeral range, nothing saved
 * to disk), pinned with the upstream and the load generators and stopped with the run, and a
 * client of it; or why none can be started here.
 */
export async function startOwnRedis(
  context: LimitsContext,
): Promise<{ url: string; client: Redis } | Skip> {
  const server = await startTestRedis().catch((error: unknown) => error as Error);
  if (server instanceof Error)
    return { reason: `no redis-server could be started: ${server.message}` };
  const client = new Redis(server.url);
  const pid = Number(infoFields(await client.info("server")).get("process_id"));
  context.adopt({
    name: "redis-server",
    pid,
    url: server.url,
    assertAlive() {},
    async stop() {
      client.disconnect();
      await server.close();
    },
  });
  if (context.pinning !== null) pin(pid, context.pinning.others);
  return { url: server.url, client };
}

/**
 * Starts a redis-server and two gatehouse processes counting in it, and pairs them with the run's
 * bare forwarders; skipped, with the reason, when no redis-server can be started here. Redis's
 * own figures are measured after the paired rounds.
 */
export async function prepareRedis(
  context: LimitsContext,
  bares: readonly Served[],
): Promise<Pairing | Skip> {
  const server = await startOwnRedis(context);
  if ("reason" in server) return server;
  const { client } = server;
  const pair: Admin[] = [];
  for (const name of ["gatehouse redis", "gatehouse redis twin"]) {
    const admin = await startConfigured(name, context, (listen, adminListen) =>
      redisConfig(listen, adminListen, context, `url: ${server.url}`, false),
    );
    context.adopt(admin.served);
    pair.push(admin);
  }
  return {
    baseline: { label: "bare http-proxy-3", served: bares, path: OPEN_ROUTE, headers: {} },
    candidate: {
      label: "gatehouse, Redis store",
      served: pair.map((admin) => admin.served),
      path: OPEN_ROUTE,
      headers: {},
    },
    async after() {
      process.stderr.write("redis: commands per request\n");
      const single = await commandsPerRequest(client, pair[0] as Admin, context);
      process.stderr.write(`redis: ${FLEET} processes on one Redis\n`);
      const fleet = await fleetFigures(() => redisStats(client), `url: ${server.url}`, context);
      process.stderr.write(`redis: ${FLEET} processes on a 3-primary Redis Cluster\n`);
      const cluster = await clusterFigures(context);
      return markdownSection(
        [
          "## redis",
          "",
          "The paired rounds are in the table above (`redis`: every request counted by the",
          "anonymous plan's rate limit and quota in one Lua script). Redis's own figures, from",
          "`INFO commandstats` and `INFO cpu` (commands run inside the script are counted by name too):",
          "",
          table(["one gatehouse process", "value"], single),
          "",
          table([`${FLEET} gatehouse processes on one Redis`, "value"], fleet),
          "",
          cluster,
          "",
        ].join("\n"),
      );
    },
  };
}
