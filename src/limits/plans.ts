/**
 * The limits section compiled for the hot path: each client's effective plan (overrides applied)
 * looked up by id, the anonymous plan, and every header value that does not change per request.
 */
import { resolve } from "node:path";
import { durationMs } from "../config/duration.js";
import { DEFAULT_RATE_NAME, limitsInForce } from "../config/limits-in-force.js";
import type { FileConfig, PlanConfig, QuotaConfig, RateLimitConfig } from "../config/schema.js";
import type { Slot } from "./counters.js";
import type { Period } from "./windows.js";

/** A rate limit ready for counting. */
export interface RateRule {
  /** The limit's name (`default` for a plan's single `rate_limit`), named in 429 bodies. */
  readonly name: string;
  /**
   * Its counter: the name holds the owner, the limit's name and the window but not the limit, so
   * a reload that changes only the limit keeps what was counted.
   */
  readonly slot: Slot;
  readonly limit: number;
  readonly limitText: string;
  /** The window as written in the file (`1m`), named in 429 bodies. */
  readonly window: string;
}

/** A quota ready for counting. */
export interface QuotaRule {
  /** Its counter's name; each calendar period adds its start to it. */
  readonly counterName: string;
  readonly limit: number;
  readonly limitText: string;
  readonly period: Period;
}

/** What a client (or the anonymous caller) is held to; at least one limit is set. */
export interface Plan {
  /** The plan's name, or `client:<id>` for a client held only to its own overrides. */
  readonly name: string;
  /** Every rate limit, in the file's order; all are enforced. */
  readonly rates: readonly RateRule[];
  readonly quota: QuotaRule | undefined;
  /** `connections`: open WebSocket connections at once; undefined for no bound. */
  readonly connections: number | undefined;
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
  /**
   * By client key (the id, or `<issuer>:<id>` for a provider's client); a client missing here
   * is not limited, unless its issuer has a plan.
   */
  readonly clients: ReadonlyMap<string, Plan>;
  /** The plan of a trusted issuer's clients that `clients` does not list, by issuer name. */
  readonly issuers: ReadonlyMap<string, Plan>;
  readonly resetHeader: "seconds" | "unix";
  /** Which header families are sent. */
  readonly headers: { readonly xRateLimit: boolean; readonly ietf: boolean };
  readonly dryRun: boolean;
  readonly store: StoreSettings;
  /** Absolute path of the memory store's state file, or undefined. */
  readonly stateFile: string | undefined;
}

function rateRule(owner: string, name: string, config: RateLimitConfig): RateRule {
  const windowMs = durationMs(config.window);
  return {
    name,
    slot: { name: `rate:${owner}:${name}:${windowMs}`, limit: config.limit, ttlMs: windowMs },
    limit: config.limit,
    limitText: String(config.limit),
    window: config.window,
  };
}

function quotaRule(owner: string, config: QuotaConfig): QuotaRule {
  return {
    counterName: `quota:${owner}:${config.period}`,
    limit: config.limit,
    limitText: String(config.limit),
    period: config.period,
  };
}

// The rate limits of a plan or a client override, in the file's order; undefined when it has none.
function rateRules(
  owner: string,
  limits: { rate_limit?: RateLimitConfig; rate_limits?: Record<string, RateLimitConfig> },
): RateRule[] | undefined {
  if (limits.rate_limit !== undefined) {
    return [rateRule(owner, DEFAULT_RATE_NAME, limits.rate_limit)];
  }
  if (limits.rate_limits === undefined) return undefined;
  return Object.entries(limits.rate_limits).map(([name, rule]) => rateRule(owner, name, rule));
}

const MEMORY: StoreSettings = { kind: "memory" };

/**
 * The anonymous plan's `connections` when the file leaves it out: WebSockets on `auth: none`
 * routes need no credential, so one address left unbounded could hold the process's every one.
 */
export const ANONYMOUS_CONNECTIONS = 16;

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
      rates: rateRules(`plan:${name}`, plan) ?? [],
      quota: plan.quota === undefined ? undefined : quotaRule(`plan:${name}`, plan.quota),
      connections: plan.connections ?? (name === "anonymous" ? ANONYMOUS_CONNECTIONS : undefined),
    });
  }
  const clients = new Map<string, Plan>();
  for (const client of file.clients) {
    const inForce = limitsInForce<PlanConfig>(client, file.plans);
    const base = inForce.plan === undefined ? undefined : plans.get(inForce.plan);
    const key = client.issuer === undefined ? client.id : `${client.issuer}:${client.id}`;
    const owner = `client:${key}`;
    // What the client sets itself is counted under its own name, what its plan sets under the
    // plan's: a reload that changes one keeps what the other counted.
    const rates = (inForce.rates === client ? rateRules(owner, client) : base?.rates) ?? [];
    const quota =
      inForce.quota === client && client.quota !== undefined
        ? quotaRule(owner, client.quota)
        : base?.quota;
    if (rates.length === 0 && quota === undefined) continue;
    clients.set(key, { name: base?.name ?? owner, rates, quota, connections: base?.connections });
  }
  const issuers = new Map<string, Plan>();
  for (const issuer of file.tokens.trusted_issuers) {
    const plan = issuer.plan === undefined ? undefined : plans.get(issuer.plan);
    if (plan !== undefined) issuers.set(issuer.name, plan);
  }
  const { limits } = file;
  return {
    anonymous: plans.get("anonymous"),
    clients,
    issuers,
    resetHeader: limits.reset_header,
    headers: {
      xRateLimit: limits.headers.includes("x-ratelimit"),
      ietf: limits.headers.includes("ietf"),
    },
    dryRun: limits.dry_run,
    store: redis === undefined ? MEMORY : { kind: "redis", ...redis },
    stateFile: limits.state_file === "" ? undefined : resolve(baseDir, limits.state_file),
  };
}

/**
 * The plan a client counts against: its own entry's (by client key), else for a provider's
 * client that `clients` does not list, its issuer's; undefined: not limited.
 */
export function clientPlan<P>(
  clients: ReadonlyMap<string, P>,
  issuers: ReadonlyMap<string, P>,
  clientKey: string,
  issuer: string | undefined,
): P | undefined {
  const listed = clients.get(clientKey);
  return listed !== undefined || issuer === undefined ? listed : issuers.get(issuer);
}
