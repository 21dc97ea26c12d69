/**
 * The connection to Redis shared by every Redis store that names the same URL: connected in the
 * background, bounded per command, and watched by a health check so readiness follows Redis.
 */
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import type { Logger } from "pino";
import type { Metrics } from "../metrics.js";
import type { RedisSettings } from "./plans.js";

/** How often Redis is asked whether it answers, so readiness follows it within 2 s (SPEC §6). */
const HEALTH_INTERVAL_MS = 500;
/** This long without an answer to a health check means Redis is stalled. */
const HEALTH_DEADLINE_MS = 1000;
/** The longest wait between two reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 1000;

/** One connection to one Redis, shared by every store that names its URL. */
export interface RedisConnection {
  readonly client: Redis;
  /** Whether Redis is connected and answered its last health check in time. */
  healthy(): boolean;
  /** Stops the health checks and closes the connection; nothing is reported after. */
  close(): Promise<void>;
}

/** What a Redis connection reports to. */
export interface RedisServices {
  readonly log: Logger;
  readonly metrics: Metrics;
}

/**
 * Connects to `settings.url` in the background: an unreachable Redis is an outage, not a start
 * error, and the connection comes back by itself.
 */
export function connectRedis(settings: RedisSettings, services: RedisServices): RedisConnection {
  const { log, metrics } = services;
  const client = new Redis(settings.url, {
    // No queue while disconnected and every command bounded, so an outage costs a
    // request at most `timeout`, never a pile of waiting commands; a command that timed out or
    // was cut off by a reconnection is not sent again later (its request was answered already).
    enableOfflineQueue: false,
    commandTimeout: settings.timeoutMs,
    autoResendUnfulfilledCommands: false,
    connectTimeout: Math.max(settings.timeoutMs, HEALTH_DEADLINE_MS),
    retryStrategy: (attempt) => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS),
  });
  // Undefined until the first verdict, so that a Redis unreachable from the start is reported.
  let answering: boolean | undefined;
  let closed = false;
  metrics.limiterStoreUp.set(0);
  const markAnswering = (now: boolean, error?: unknown): void => {
    if (closed || now === answering) return;
    answering = now;
    metrics.limiterStoreUp.set(now ? 1 : 0);
    if (now) log.info({ redis: settings.display }, "redis answers; limits are shared again");
    else
      log.warn({ redis: settings.display, err: error }, "redis does not answer; on_outage applies");
  };
  // ioredis reports every failed connection attempt as an error event.
  client.on("error", (error: Error) => markAnswering(false, error));
  client.on("close", () => markAnswering(false));
  // A PING slower than `timeout` fails like any command, but only a second without any answer
  // counts as a stall: one slow moment does not drop the connection.
  let lastAnswer = 0;
  let checking = false;
  const check = (): void => {
    if (client.status !== "ready") return;
    if (performance.now() - lastAnswer > HEALTH_DEADLINE_MS) {
      markAnswering(false, new Error(`no answer to PING for ${HEALTH_DEADLINE_MS} ms`));
      // Connected but silent (a stalled Redis keeps its socket open): drop the connection, so
      // commands fail at once while it lasts instead of each waiting for the timeout.
      client.disconnect(true);
      return;
    }
    if (checking) return;
    checking = true;
    client
      .ping()
      .then(
        () => {
          lastAnswer = performance.now();
          markAnswering(true);
        },
        () => undefined,
      )
      .finally(() => {
        checking = false;
      });
  };
  client.on("ready", () => {
    lastAnswer = performance.now();
    check();
  });
  const health = setInterval(check, HEALTH_INTERVAL_MS);
  health.unref();
  return {
    client,
    healthy: () => answering === true && client.status === "ready",
    async close() {
      closed = true;
      clearInterval(health);
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
