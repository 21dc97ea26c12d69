/**
 * Where counters live: the memory store here, the Redis store in `redis-store.ts` (RLF's memory
 * and Redis limiters share one interface); only these two create rate-limiter-flexible limiters.
 * Limiters are kept by a fingerprint of their rule, so a reload that leaves a rule unchanged keeps
 * its counters (envoyproxy/ratelimit keys limits the same way).
 */
import { RateLimiterMemory, type RateLimiterAbstract } from "rate-limiter-flexible";

/** A counting rule: `points` per `durationMs`, under a name that keeps unrelated counters apart. */
export interface WindowRule {
  /** Which counters these are, e.g. `rate:plan:standard` or `auth-failures:ip`. */
  readonly name: string;
  readonly points: number;
  readonly durationMs: number;
}

/** Hands out limiters; the same rule always gets the same limiter and so the same counters. */
export interface LimiterStore {
  readonly kind: "memory" | "redis";
  limiter(rule: WindowRule): RateLimiterAbstract;
  /** Whether the counters can be reached now (memory: always). */
  healthy(): boolean;
}

/** One saved counter: RLF's own dump record. */
export interface SavedCounter {
  readonly key: string | number;
  readonly value: number;
  readonly expiresAt: number | null;
}

/** Every live counter of a memory store, by rule fingerprint. */
export type SavedCounters = Readonly<Record<string, readonly SavedCounter[]>>;

/** The memory store, which can also save its counters and take them back after a restart. */
export interface MemoryLimiterStore extends LimiterStore {
  readonly kind: "memory";
  /** Every counter that has not expired. */
  save(): SavedCounters;
  /** Counters to put back; each limiter takes its own when it is created (or at once if it is). */
  restore(saved: SavedCounters): void;
}

/**
 * The fingerprint that decides whether two rules share counters. The points are left out: a
 * reload that changes a limit keeps what was already counted in the current window (SPEC §6).
 */
export function ruleFingerprint(rule: WindowRule): string {
  return `${rule.name}|${rule.durationMs}`;
}

/** A store keeping counters in this process's memory. */
export function createMemoryStore(): MemoryLimiterStore {
  const limiters = new Map<string, RateLimiterMemory>();
  let pending = new Map<string, readonly SavedCounter[]>();
  const restoreInto = (limiter: RateLimiterMemory, counters: readonly SavedCounter[]): void => {
    limiter.restore({ version: 1, storage: [...counters] });
  };
  return {
    kind: "memory",
    healthy: () => true,
    limiter(rule) {
      const key = ruleFingerprint(rule);
      let limiter = limiters.get(key);
      if (limiter === undefined) {
        limiter = new RateLimiterMemory({
          keyPrefix: rule.name,
          points: rule.points,
          duration: rule.durationMs / 1000,
        });
        limiters.set(key, limiter);
        const saved = pending.get(key);
        if (saved !== undefined) {
          pending.delete(key);
          restoreInto(limiter, saved);
        }
      } else if (limiter.points !== rule.points) {
        // The same counters under a new limit: users of RLF's own verdict see the new limit.
        limiter.points = rule.points;
      }
      return limiter;
    },
    save() {
      const saved: Record<string, SavedCounter[]> = {};
      for (const [key, limiter] of limiters) saved[key] = limiter.dump().storage;
      for (const [key, counters] of pending) saved[key] ??= [...counters];
      return saved;
    },
    restore(saved) {
      pending = new Map(Object.entries(saved));
      for (const [key, limiter] of limiters) {
        const counters = pending.get(key);
        if (counters === undefined) continue;
        pending.delete(key);
        restoreInto(limiter, counters);
      }
    },
  };
}

/** A counter after this request's points were added. */
export interface Count {
  /** Points counted in the current window, this request's included. */
  readonly consumed: number;
  /** Milliseconds until the window ends (by the store's clock). */
  readonly msBeforeNext: number;
}

// RLF's memory limiter counts synchronously and wraps the result in a promise; on the request
// path that wrapping (and the microtasks it adds) cost more than the counting. Its storage is
// used directly instead, with the same key and lifetime RLF would use; rate-limiter-flexible is
// pinned (~11.4) and a test holds this to RLF's own `get()`.
interface MemoryInternals {
  readonly duration: number;
  readonly _memoryStorage: {
    incrby(
      key: string,
      value: number,
      durationSec: number,
    ): { readonly consumedPoints: number; readonly msBeforeNext: number };
  };
}

/**
 * Adds `points` to `key` and reports the total; gatehouse compares it with the limit in force
 * itself. In memory the count is synchronous; other stores answer with a promise of it (RLF's
 * `penalty`, its atomic increment without a verdict). `durationSec` sets the lifetime of a counter
 * this call creates (calendar quotas).
 */
export function addPoints(
  limiter: RateLimiterAbstract,
  key: string,
  points: number,
  durationSec?: number,
): Count | Promise<Count> {
  if (limiter instanceof RateLimiterMemory) {
    const memory = limiter as unknown as MemoryInternals;
    const res = memory._memoryStorage.incrby(
      limiter.getKey(key),
      points,
      durationSec ?? memory.duration,
    );
    return { consumed: res.consumedPoints, msBeforeNext: res.msBeforeNext };
  }
  return limiter
    .penalty(key, points, durationSec === undefined ? undefined : { customDuration: durationSec })
    .then((res) => ({ consumed: res.consumedPoints, msBeforeNext: res.msBeforeNext }));
}

/**
 * Takes back points added for a request that was refused (SPEC §6: a 429 consumes nothing);
 * synchronous in memory, as `addPoints` is.
 */
export function refundPoints(
  limiter: RateLimiterAbstract,
  key: string,
  points: number,
): void | Promise<void> {
  if (limiter instanceof RateLimiterMemory) {
    addPoints(limiter, key, -points);
    return undefined;
  }
  return limiter.reward(key, points).then(() => undefined);
}
