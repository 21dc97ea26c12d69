/**
 * Where counters live. The only module that creates rate-limiter-flexible limiters: the memory
 * store now, a Redis store beside it (RLF's memory and Redis limiters share one interface).
 * Limiters are kept by a fingerprint of their rule, so a reload that leaves a rule unchanged keeps
 * its counters (envoyproxy/ratelimit keys limits the same way).
 */
import { RateLimiterMemory, type RateLimiterAbstract } from "rate-limiter-flexible";

/** A counting rule: `points` per `durationMs`, under a name that keeps unrelated counters apart. */
export interface WindowRule {
  /** Which counters these are, e.g. `rate:standard` or `auth-failures:ip`. */
  readonly name: string;
  readonly points: number;
  readonly durationMs: number;
}

/** Hands out limiters; the same rule always gets the same limiter and so the same counters. */
export interface LimiterStore {
  readonly kind: "memory" | "redis";
  limiter(rule: WindowRule): RateLimiterAbstract;
}

/** The fingerprint that decides whether two rules share counters. */
export function ruleFingerprint(rule: WindowRule): string {
  return `${rule.name}|${rule.points}|${rule.durationMs}`;
}

/** A store keeping counters in this process's memory. */
export function createMemoryStore(): LimiterStore {
  const limiters = new Map<string, RateLimiterAbstract>();
  return {
    kind: "memory",
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
      }
      return limiter;
    },
  };
}
