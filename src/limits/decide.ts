/**
 * The limit decision, as plain data: computed from the counters once, then rendered into headers
 * and a status by `headers.ts` (fastify-rate-limit keeps the same split).
 */
import type { Count } from "./store.js";
import type { QuotaRule, RateRule } from "./plans.js";

/** Why a request is (or, in dry run, would be) refused. */
export type Refusal = "rate_limited" | "quota_exceeded";

/** What one window reports in headers. */
export interface WindowState {
  readonly limitText: string;
  /** Points left, never negative; a refused request's own points are not taken. */
  readonly remaining: number;
  /** Seconds until the window ends, rounded up, at least 1. */
  readonly resetSeconds: number;
  /** The epoch second at or after the window's end. */
  readonly resetAt: number;
}

/** The outcome for one request. */
export interface Decision {
  /** False only when the request is answered 429 (never in dry run). */
  readonly allowed: boolean;
  /** The limit that is (or in dry run would be) exceeded, or undefined when none is. */
  readonly refusal: Refusal | undefined;
  readonly rate: WindowState | undefined;
  readonly quota: WindowState | undefined;
  /** With a refusal: the largest reset among the windows that refused (SPEC §6). */
  readonly retryAfter: number;
  /** With a refusal: the limit and window of the window naming it (the later reset). */
  readonly limit: number;
  readonly window: string;
}

/** The counters of one request, with the rules they were counted under. */
export interface DecisionInput {
  readonly rate: { readonly rule: RateRule; readonly count: Count } | undefined;
  readonly quota:
    { readonly rule: QuotaRule; readonly count: Count; readonly endMs: number } | undefined;
  readonly cost: number;
  readonly nowMs: number;
  readonly dryRun: boolean;
}

interface Refused {
  readonly refusal: Refusal;
  readonly retryAfter: number;
  readonly limit: number;
  readonly window: string;
}

function windowState(
  limit: number,
  limitText: string,
  counted: number,
  msLeft: number,
  nowMs: number,
): WindowState {
  const ms = Math.max(msLeft, 1);
  return {
    limitText,
    remaining: Math.max(0, limit - counted),
    resetSeconds: Math.max(1, Math.ceil(ms / 1000)),
    resetAt: Math.ceil((nowMs + ms) / 1000),
  };
}

/** Decides from the counters, which already include this request's cost. */
export function decide(input: DecisionInput): Decision {
  const { rate, quota, cost, nowMs } = input;
  const overRate = rate !== undefined && rate.count.consumed > rate.rule.limit;
  const overQuota = quota !== undefined && quota.count.consumed > quota.rule.limit;
  const allowed = input.dryRun || !(overRate || overQuota);
  // A refused request's points are refunded, so they are not shown as taken.
  const taken = allowed ? 0 : cost;
  let refused: Refused | undefined;
  let rateState: WindowState | undefined;
  let quotaState: WindowState | undefined;
  if (rate !== undefined) {
    const { rule, count } = rate;
    rateState = windowState(
      rule.limit,
      rule.limitText,
      count.consumed - taken,
      count.msBeforeNext,
      nowMs,
    );
    if (overRate) {
      refused = {
        refusal: "rate_limited",
        retryAfter: rateState.resetSeconds,
        limit: rule.limit,
        window: rule.window,
      };
    }
  }
  if (quota !== undefined) {
    const { rule, count } = quota;
    quotaState = windowState(
      rule.limit,
      rule.limitText,
      count.consumed - taken,
      quota.endMs - nowMs,
      nowMs,
    );
    // SPEC §6: when both refuse, the window with the later reset names the error.
    if (overQuota && (refused === undefined || quotaState.resetSeconds >= refused.retryAfter)) {
      refused = {
        refusal: "quota_exceeded",
        retryAfter: quotaState.resetSeconds,
        limit: rule.limit,
        window: rule.period,
      };
    }
  }
  return {
    allowed,
    refusal: refused?.refusal,
    rate: rateState,
    quota: quotaState,
    retryAfter: refused?.retryAfter ?? 0,
    limit: refused?.limit ?? 0,
    window: refused?.window ?? "",
  };
}
