/**
 * The Redis store: counters shared by every replica that names the same Redis and key prefix
 * (SPEC §4.4), through rate-limiter-flexible's Redis limiter, whose increment is one atomic Lua
 * script. Every call is bounded by `redis.timeout`; while Redis is down or slow, `on_outage`
 * decides: `local` counts in this process's memory instead (RLF's insurance limiter), `open` and
 * `closed` let the call fail and leave the answer to the limits stage.
 */
import { Redis } from "ioredis";
import { RateLimiterMemory, RateLimiterRedis } from "rate-limiter-flexible";
import type { Logger } from "pino";
import type { Metrics } from "../metrics.js";
import type { RedisSettings } from "./plans.js";
import { ruleFingerprint, type LimiterStore, type WindowRule } from "./store.js";

/** How often Redis is asked whether it answers, so readiness follows it within 2 s (SPEC §6). */
const HEALTH_INTERVAL_MS = 500;
/** The longest wait between two reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 1000;

/** A store whose counters live in Redis. */
export interface RedisLimiterStore extends LimiterStore {
  readonly kind: "redis";
  /** Closes the connection; the limiters it handed out fail (or fall back) from then on. */
  close(): Promise<void>;
}

/** What the Redis store reports to. */
export interface RedisStoreServices {
  readonly log: Logger;
  readonly metrics: Metrics;
}

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

/** Connects to Redis (in the background: an unreachable Redis is an outage, not a start error). */
export function createRedisStore(
  settings: RedisSettings,
  services: RedisStoreServices,
): RedisLimiterStore {
  const { log, metrics } = services;
  const client = new Redis(settings.url, {
    // BAD_INPUTS 4.4: no queue while disconnected, every command bounded, one retry at most, so
    // an outage costs a request at most `timeout`, never a pile of waiting commands.
    enableOfflineQueue: false,
    commandTimeout: settings.timeoutMs,
    connectTimeout: Math.max(settings.timeoutMs, 1000),
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  });
  let answering = false;
  // Registered with the first Redis store: with the memory store the gauge would mean nothing.
  if (metrics.registry.getSingleMetric("gatehouse_limiter_store_up") === undefined) {
    metrics.registry.registerMetric(metrics.limiterStoreUp);
  }
  metrics.limiterStoreUp.set(0);
  const markAnswering = (now: boolean, error?: unknown): void => {
    if (now === answering) return;
    answering = now;
    metrics.limiterStoreUp.set(now ? 1 : 0);
    if (now) log.info({ redis: settings.display }, "redis answers; limits are shared again");
    else
      log.warn({ redis: settings.display, err: error }, "redis does not answer; on_outage applies");
  };
  // ioredis reports every failed reconnection here; without a listener it would crash the process.
  client.on("error", (error: Error) => markAnswering(false, error));
  client.on("close", () => markAnswering(false));
  const check = (): void => {
    client.ping().then(
      () => markAnswering(true),
      (error: unknown) => markAnswering(false, error),
    );
  };
  client.on("ready", check);
  const health = setInterval(check, HEALTH_INTERVAL_MS);
  health.unref();

  const onFallback = (): void => metrics.limiterFallbacks.inc();
  const limiters = new Map<string, { redis: RateLimiterRedis; fallback?: FallbackLimiter }>();
  return {
    kind: "redis",
    limiter(rule: WindowRule) {
      const key = ruleFingerprint(rule);
      let entry = limiters.get(key);
      if (entry === undefined) {
        // Redis keys expire in whole seconds (SET ... EX).
        const duration = Math.max(1, Math.ceil(rule.durationMs / 1000));
        const fallback =
          settings.onOutage === "local"
            ? new FallbackLimiter(
                { keyPrefix: `fallback:${rule.name}`, points: rule.points, duration },
                onFallback,
              )
            : undefined;
        const redis = new RateLimiterRedis({
          storeClient: client,
          keyPrefix: `${settings.keyPrefix}${rule.name}`,
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
    healthy: () => answering && client.status === "ready",
    async close() {
      clearInterval(health);
      // A retired store no longer reports: the gauge belongs to the store in force.
      client.removeAllListeners();
      client.on("error", () => undefined);
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
