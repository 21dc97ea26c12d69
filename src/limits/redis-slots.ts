/**
 * Open WebSocket connections per client in Redis: one sorted set per subject under its hash tag,
 * whose members are leases scored by when they end. Every replica renews its open leases, so a
 * replica that dies without closing its connections (kill -9, a lost node) frees their slots
 * within LEASE_MS.
 */
import { randomUUID } from "node:crypto";
import type { Clock, Timer } from "../clock.js";
import type { Metrics } from "../metrics.js";
import { createMemorySlots, UNCOUNTED } from "./connection-slots.js";
import type { ConnectionSlots, SlotLease, SlotOutcome } from "./counters.js";
import type { RedisSettings } from "./plans.js";
import { notCallable, type RedisConnection } from "./redis-connection.js";

/** How long a Redis lease lives unless renewed; renewed every third of it. */
export const LEASE_MS = 30_000;

// KEYS[1]: the subject's leases, scored by their end. ARGV: now, the limit, the new lease's end,
// its id, the set's lifetime. Ended leases are dropped first; a lease is added while there is room.
const ACQUIRE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`;

/** What the Redis slots are made with. */
export interface RedisSlotsOptions {
  readonly connection: RedisConnection;
  readonly settings: RedisSettings;
  readonly metrics: Metrics;
  readonly now: () => number;
  readonly clock: Clock;
}

/**
 * Slots in Redis, shared by every replica with the same key prefix. While Redis cannot be
 * reached, `on_outage` decides: `local` counts in this process, `open` lets the connection be
 * without a slot, `closed` answers "unavailable".
 */
export function createRedisSlots(options: RedisSlotsOptions): ConnectionSlots {
  const { connection, settings, metrics, now, clock } = options;
  const { client, callable, watched } = connection;
  const fallback = settings.onOutage === "local" ? createMemorySlots() : undefined;
  // The leases this process holds: their set's key, by lease id.
  const open = new Map<string, string>();
  let renewal: Timer | undefined;

  const renew = (): void => {
    if (open.size === 0 || !callable()) return;
    const ends = now() + LEASE_MS;
    const pipeline = client.pipeline();
    for (const [id, key] of open) {
      pipeline.zadd(key, "XX", ends, id);
      pipeline.pexpire(key, LEASE_MS);
    }
    // A renewal that fails is tried again at the next; the lease holds until its end meanwhile.
    void pipeline.exec().catch(() => undefined);
  };

  const leaseOf = (key: string, id: string): SlotLease => {
    open.set(id, key);
    renewal ??= clock.every(LEASE_MS / 3, renew);
    return {
      release() {
        if (!open.delete(id)) return;
        void client.zrem(key, id).catch(() => undefined);
      },
    };
  };

  const outage = (subject: string, limit: number, nowMs: number): Promise<SlotOutcome> => {
    if (fallback !== undefined) {
      metrics.limiterFallbacks.inc();
      return fallback.acquire(subject, limit, nowMs);
    }
    return Promise.resolve(settings.onOutage === "open" ? UNCOUNTED : "unavailable");
  };

  return {
    async acquire(subject, limit, nowMs) {
      const key = `${settings.keyPrefix}{${subject}}:connections`;
      const id = randomUUID();
      try {
        if (!callable()) throw notCallable();
        metrics.limiterRoundTrips.inc();
        const args = [nowMs, limit, nowMs + LEASE_MS, id, LEASE_MS];
        const added = await watched(client.eval(ACQUIRE_SCRIPT, 1, key, ...args));
        return added === 1 ? leaseOf(key, id) : "full";
      } catch {
        return outage(subject, limit, nowMs);
      }
    },
    close() {
      renewal?.cancel();
      open.clear();
    },
  };
}
