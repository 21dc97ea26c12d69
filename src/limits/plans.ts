/**
 * The limits section compiled for the hot path: each client's effective plan (overrides applied)
 * looked up by id, the anonymous plan, and every header value that does not change per request.
 */
import { resolve } from "node:path";
import { durationMs } from "../config/duration.js";
import type { FileConfig, QuotaConfig, RateLimitConfig } from "../config/schema.js";
import type { WindowRule } from "./store.js";
import type { Period } from "./windows.js";

/** A rate limit ready for counting. */
export interface RateRule {
  /** Which counters: the limit is not part of it, so a changed limit keeps what was counted. */
  readonly counter: WindowRule;
  readonly limit: number;
  readonly limitText: string;
  /** The window as written in the file (`1m`), named in 429 bodies. */
  readonly window: string;
}

/** A quota ready for counting. */
export interface QuotaRule {
  readonly counter: WindowRule;
  readonly limit: number;
  readonly limitText: string;
  readonly period: Period;
}

/** What a client (or the anonymous caller) is held to; at least one of the two is set. */
export interface Plan {
  /** The plan's name, or `client:<id>` for a client held only to its own overrides. */
  readonly name: string;
  readonly rate: RateRule | undefined;
  readonly quota: QuotaRule | undefined;
}

/** One Redis node's address. */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/** Where Redis is: one server, a Cluster found from seed nodes, or the primary Sentinel names. */
export type RedisTopology =
  | { readonly kind: "server"; readonly url: string }
  | { readonly kind: "cluster"; readonly nodes: readonly RedisNode[] }
  | {
      readonly kind: "sentinel";
      readonly masterName: string;
      readonly nodes: readonly RedisNode[];
      /** The Sentinels' own password. */
      readonly password: string | undefined;
    };

/** Where the counters of a Redis store live, how to reach them, and what an outage does. */
export interface RedisSettings {
  readonly topology: RedisTopology;
  readonly username: string | undefined;
  readonly password: string | undefined;
  /** Undefined: plain TCP; else every connection (nodes and Sentinels) uses TLS. */
  readonly tls:
    { readonly ca: string | undefined; readonly servername: string | undefined } | undefined;
  /** Equal for two settings exactly when they make the same connection; it holds no secret. */
  readonly connectionKey: string;
  /** Where Redis is, without any password, for logs. */
  readonly display: string;
  readonly keyPrefix: string;
  readonly timeoutMs: number;
  readonly onOutage: "local" | "open" | "closed";
}

/** The counters' store: this process's memory, or a Redis shared by the replicas. */
export type StoreSettings =
  { readonly kind: "memory" } | ({ readonly kind: "redis" } & RedisSettings);

/** The compiled `limits` section with the plans. */
export interface LimitsSettings {
  /** For `auth: none` routes, keyed by client IP; undefined: those routes are not limited. */
  readonly anonymous: Plan | undefined;
  /** By client id; a client missing here is not limited. */
  readonly clients: ReadonlyMap<string, Plan>;
  readonly resetHeader: "seconds" | "unix";
  readonly dryRun: boolean;
  readonly store: StoreSettings;
  /** Absolute path of the memory store's state file, or undefined. */
  readonly stateFile: string | undefined;
}

// Long enough for any calendar month; each quota counter expires at its own period's end.
const LONGEST_PERIOD_MS: Readonly<Record<Period, number>> = {
  hour: 3_600_000,
  day: 86_400_000,
  month: 31 * 86_400_000,
};

function rateRule(owner: string, config: RateLimitConfig): RateRule {
  return {
    counter: { name: `rate:${owner}`, points: config.limit, durationMs: durationMs(config.window) },
    limit: config.limit,
    limitText: String(config.limit),
    window: config.window,
  };
}

function quotaRule(owner: string, config: QuotaConfig): QuotaRule {
  return {
    counter: {
      name: `quota:${owner}:${config.period}`,
      points: config.limit,
      durationMs: LONGEST_PERIOD_MS[config.period],
    },
    limit: config.limit,
    limitText: String(config.limit),
    period: config.period,
  };
}

const MEMORY: StoreSettings = { kind: "memory" };

/**
 * Compiles plans and client overrides; `baseDir` resolves `state_file`, and `redis` is the
 * compiled `limits.redis` section when the store is Redis.
 */
export function compileLimits(
  file: FileConfig,
  baseDir: string,
  redis: RedisSettings | undefined,
): LimitsSettings {
  const plans = new Map<string, Plan>();
  for (const [name, plan] of Object.entries(file.plans)) {
    plans.set(name, {
      name,
      rate: plan.rate_limit === undefined ? undefined : rateRule(`plan:${name}`, plan.rate_limit),
      quota: plan.quota === undefined ? undefined : quotaRule(`plan:${name}`, plan.quota),
    });
  }
  const clients = new Map<string, Plan>();
  for (const client of file.clients) {
    // SPEC §6: a client without `plan` uses the plan named `default` when one exists.
    const base = plans.get(client.plan ?? "default");
    const owner = `client:${client.id}`;
    const rate = client.rate_limit === undefined ? base?.rate : rateRule(owner, client.rate_limit);
    const quota = client.quota === undefined ? base?.quota : quotaRule(owner, client.quota);
    if (rate === undefined && quota === undefined) continue;
    clients.set(client.id, { name: base?.name ?? owner, rate, quota });
  }
  const { limits } = file;
  return {
    anonymous: plans.get("anonymous"),
    clients,
    resetHeader: limits.reset_header,
    dryRun: limits.dry_run,
    store: redis === undefined ? MEMORY : { kind: "redis", ...redis },
    stateFile: limits.state_file === "" ? undefined : resolve(baseDir, limits.state_file),
  };
}
