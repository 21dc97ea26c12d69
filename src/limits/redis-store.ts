/**
 * The Redis store: counters shared by every replica that names the same Redis and key prefix
 * (SPEC §4.4), through rate-limiter-flexible's Redis limiter, whose increment is one atomic Lua
 * script. Every call is bounded by `redis.timeout`; while Redis is down or slow, `on_outage`
 * decides: `local` counts in this process's memory instead (RLF's insurance limiter), `open` and
 * `closed` let the call fail and leave the answer to the limits stage.
 */
import { RateLimiterMemory, RateLimiterRedis } from "rate-limiter-flexible";
import type { Metrics } from "../metrics.js";
import type { RedisSettings } from "./plans.js";
import type { RedisConnection } from "./redis-connection.js";
import { ruleFingerprint, type LimiterStore, type WindowRule } from "./store.js";

/**
 * A memory limiter standing in for Redis during an outage (`on_outage: local`); each call it
 * answers is a fallback, counted for /metrics.
 */
class FallbackLimiter extends RateLimiterMemory {
  constructor(
    options: ConstructorParameters<typeof RateLimiterMemory>[0],
    private readonly onFallback: () => void,
  ) {
    super(options);
  }

  override penalty(...args: Parameters<RateLimiterMemory["penalty"]>) {
    this.onFallback();
    return super.penalty(...args);
  }

  override reward(...args: Parameters<RateLimiterMemory["reward"]>) {
    this.onFallback();
    return super.reward(...args);
  }

  override get(...args: Parameters<RateLimiterMemory["get"]>) {
    this.onFallback();
    return super.get(...args);
  }
}

/**
 * A store over `connection` with the key prefix and outage policy of `settings`. Counters live
 * in Redis, so two stores with the same prefix share them.
 */
export function createRedisStore(
  connection: RedisConnection,
  settings: RedisSettings,
  metrics: Metrics,
): LimiterStore {
  // The connection's commands are bounded by the timeout of the store in force.
  connection.client.options.commandTimeout = settings.timeoutMs;
  const onFallback = (): void => metrics.limiterFallbacks.inc();
  const limiters = new Map<string, { redis: RateLimiterRedis; fallback?: FallbackLimiter }>();
  return {
    kind: "redis",
    healthy: connection.healthy,
    limiter(rule: WindowRule) {
      const key = ruleFingerprint(rule);
      let entry = limiters.get(key);
      if (entry === undefined) {
        // Redis keys expire in whole seconds (SET ... EX). The window is part of the key, as it
        // is of the fingerprint: a key keeps the lifetime it was created with.
        const duration = Math.max(1, Math.ceil(rule.durationMs / 1000));
        const fallback =
          settings.onOutage === "local"
            ? new FallbackLimiter(
                { keyPrefix: `fallback:${rule.name}`, points: rule.points, duration },
                onFallback,
              )
            : undefined;
        const redis = new RateLimiterRedis({
          storeClient: connection.client,
          keyPrefix: `${settings.keyPrefix}${rule.name}:${duration}s`,
          points: rule.points,
          duration,
          // Not connected: fail (or fall back) at once instead of waiting for the timeout.
          rejectIfRedisNotReady: true,
          insuranceLimiter: fallback,
        });
        entry = fallback === undefined ? { redis } : { redis, fallback };
        limiters.set(key, entry);
      } else if (entry.redis.points !== rule.points) {
        // The same counters under a new limit, as in the memory store.
        entry.redis.points = rule.points;
        if (entry.fallback !== undefined) entry.fallback.points = rule.points;
      }
      return entry.redis;
    },
  };
}
