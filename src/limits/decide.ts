/**
 * The limit decision, as plain data: computed from the counters once, then rendered into headers
 * and a status by `headers.ts` (fastify-rate-limit keeps the same split).
 */
import type { ErrorCode } from "../http/error-codes.js";
import { refuses, type Counted } from "./counters.js";
import type { Plan } from "./plans.js";

/** Why a request is (or, in dry run, would be) refused. */
export type Refusal = Extract<ErrorCode, "rate_limited" | "quota_exceeded">;

/** The name the quota goes by among a plan's limits. */
export const QUOTA_POLICY = "quota";

/** What one limit reports in headers. */
export interface WindowState {
  /** The limit's name: a rate limit's, or `quota`. */
  readonly name: string;
  readonly limit: number;
  readonly limitText: string;
  /** Points left, never negative; a refused request's own points are not taken. */
  readonly remaining: number;
  /** Seconds until the window ends, rounded up, at least 1. */
  readonly resetSeconds: number;
  /** The epoch second at or after the window's end. */
  readonly resetAt: number;
  /** Whether this limit refuses (or in dry run would refuse) the request. */
  readonly refuses: boolean;
}

/** The outcome for one request. */
export interface Decision {
  /** False only when the request is answered 429 (never in dry run). */
  readonly allowed: boolean;
  /** The limit that is (or in dry run would be) exceeded, or undefined when none is. */
  readonly refusal: Refusal | undefined;
  /** The rate limit that `X-RateLimit-*` describe, if the plan has one. */
  readonly rate: WindowState | undefined;
  readonly quota: WindowState | undefined;
  /** Every limit of the plan, rate limits first in the plan's order, then the quota. */
  readonly limits: readonly WindowState[];
  /** With a refusal: the largest reset among the limits that refused. */
  readonly retryAfter: number;
  /** With a refusal: the name, limit and window of the limit naming it (the later reset). */
  readonly policy: string;
  readonly limit: number;
  readonly window: string;
}

function windowState(
  name: string,
  limit: number,
  limitText: string,
  count: number,
  endsAt: number,
  refuses: boolean,
  nowMs: number,
): WindowState {
  const ms = Math.max(endsAt - nowMs, 1);
  return {
    name,
    limit,
    limitText,
    remaining: Math.max(0, limit - count),
    resetSeconds: Math.max(1, Math.ceil(ms / 1000)),
    resetAt: Math.ceil((nowMs + ms) / 1000),
    refuses,
  };
}

// Which of two states a header shows: the one with fewer points left, on a tie the later reset.
function tighter(a: WindowState, b: WindowState): WindowState {
  if (a.remaining !== b.remaining) return a.remaining < b.remaining ? a : b;
  return b.resetSeconds > a.resetSeconds ? b : a;
}

/**
 * Decides from what the store counted for `plan`'s slots (its rate limits in order, then its
 * quota). Counts include this request's cost when it was added.
 */
export function decide(
  plan: Plan,
  counted: Counted,
  cost: number,
  nowMs: number,
  dryRun: boolean,
): Decision {
  const { counts, endsAt, added } = counted;
  const over = (index: number, limit: number): boolean =>
    refuses(counts[index] ?? 0, added, cost, limit);
  const limits: WindowState[] = [];
  let header: WindowState | undefined;
  let naming: WindowState | undefined;
  let naming429: Refusal | undefined;
  let window = "";
  plan.rates.forEach((rule, i) => {
    const state = windowState(
      rule.name,
      rule.limit,
      rule.limitText,
      counts[i] ?? 0,
      endsAt[i] ?? nowMs,
      over(i, rule.limit),
      nowMs,
    );
    limits.push(state);
    header = header === undefined ? state : tighter(header, state);
    if (state.refuses && (naming === undefined || state.resetSeconds > naming.resetSeconds)) {
      naming = state;
      naming429 = "rate_limited";
      window = rule.window;
    }
  });
  // On a refusal by a rate limit, its headers describe the refusing one.
  const rate = naming ?? header;
  let quota: WindowState | undefined;
  if (plan.quota !== undefined) {
    const i = plan.rates.length;
    const rule = plan.quota;
    quota = windowState(
      QUOTA_POLICY,
      rule.limit,
      rule.limitText,
      counts[i] ?? 0,
      endsAt[i] ?? nowMs,
      over(i, rule.limit),
      nowMs,
    );
    limits.push(quota);
    // When both refuse, the limit with the later reset names the error.
    if (quota.refuses && (naming === undefined || quota.resetSeconds >= naming.resetSeconds)) {
      naming = quota;
      naming429 = "quota_exceeded";
      window = rule.period;
    }
  }
  const retryAfter = limits.reduce(
    (latest, state) => (state.refuses ? Math.max(latest, state.resetSeconds) : latest),
    0,
  );
  return {
    allowed: dryRun || naming === undefined,
    refusal: naming429,
    rate,
    quota,
    limits,
    retryAfter,
    policy: naming?.name ?? "",
    limit: naming?.limit ?? 0,
    window,
  };
}
