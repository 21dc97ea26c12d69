/**
 * The Redis stores of a process: one connection per connection settings (where Redis is, how it
 * is reached, the timeout) and one store per Redis settings, outliving reloads, so a reload that
 * changes only the prefix or outage policy keeps the connection, and one that leaves a plan alone keeps its counters. Imported only when a config
 * names Redis, so a memory-store gatehouse never loads the Redis client.
 */
import type { Logger } from "pino";
import { showLimiterStoreUp, type Metrics } from "../metrics.js";
import type { RedisSettings } from "./plans.js";
import { connectRedis, type RedisConnection } from "./redis-connection.js";
import { createRedisStore, type RedisStore } from "./redis-store.js";
import type { Clock } from "../clock.js";

/** What the Redis stores report to and count by. */
export interface RedisStoresServices {
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly now: () => number;
  readonly clock: Clock;
}

/** The registry of Redis stores. */
export interface RedisStores {
  /** The store for `settings`, connecting to its Redis when no store uses it yet. */
  storeFor(settings: RedisSettings): RedisStore;
  /** Closes every store and connection but the ones `inForce` uses (none: every one). */
  release(inForce: RedisSettings | undefined): Promise<void>;
}

// The Redis settings that make a store: another prefix or outage policy is another store over the
// same connection (one per connection key, which the timeout is part of).
function storeKey(settings: RedisSettings): string {
  return JSON.stringify([settings.connectionKey, settings.keyPrefix, settings.onOutage]);
}

/** Creates an empty registry. */
export function createRedisStores(services: RedisStoresServices): RedisStores {
  const connections = new Map<string, RedisConnection>();
  const stores = new Map<string, RedisStore>();
  return {
    storeFor(settings) {
      const key = storeKey(settings);
      let connection = connections.get(settings.connectionKey);
      if (connection === undefined) {
        connection = connectRedis(settings, services);
        connections.set(settings.connectionKey, connection);
      }
      connection.outagePolicy(settings.onOutage);
      let store = stores.get(key);
      if (store === undefined) {
        store = createRedisStore(
          connection,
          settings,
          services.metrics,
          services.now,
          services.clock,
        );
        stores.set(key, store);
      }
      showLimiterStoreUp(services.metrics, true);
      return store;
    },
    async release(inForce) {
      const key = inForce === undefined ? undefined : storeKey(inForce);
      for (const [stored, store] of [...stores]) {
        if (stored === key) continue;
        stores.delete(stored);
        store.close();
      }
      const closing = [...connections].filter(([key]) => key !== inForce?.connectionKey);
      for (const [key] of closing) connections.delete(key);
      showLimiterStoreUp(services.metrics, inForce !== undefined);
      await Promise.all(closing.map(([, connection]) => connection.close()));
    },
  };
}
