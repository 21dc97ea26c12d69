/**
 * `full-redis`: the `full` request through two gatehouse processes whose limits count in a
 * redis-server the bench starts itself (`limits.store: redis`), side by side with the bare
 * forwarder. `full` (the same request, counted in memory) and `redis` (counting in Redis on an
 * `auth: none` route) of the same run are its references: this is the whole pipeline, the token
 * and its scope checked, on the Redis store, so it also carries whatever Redis work bearer
 * enforcement does there.
 */
import { redisLimits, startOwnRedis } from "./redis.js";
import { fullRequest, type Pairing, type Skip } from "./scenarios.js";
import type { Shared } from "./shared.js";

/**
 * Starts a redis-server and two gatehouse processes counting the full request in it, and pairs
 * them with the run's bare forwarders; skipped, with the reason, when no redis-server can be
 * started here.
 */
export async function prepareFullRedis(shared: Shared): Promise<Pairing | Skip> {
  const server = await startOwnRedis(await shared.context());
  if ("reason" in server) return server;
  const pair = await shared.variants("gatehouse full redis", {
    limits: redisLimits(`url: ${server.url}`, "bench-full:"),
  });
  const { path, headers } = await fullRequest(pair[0], shared.secrets);
  return {
    baseline: { label: "bare http-proxy-3", served: await shared.bares(), path, headers },
    candidate: { label: "gatehouse, full on Redis", served: pair, path, headers },
  };
}
