/** The one place a limit decision becomes response headers and, when it refuses, the 429. */
import type { Reply } from "../core/context.js";
import type { Decision, Refusal } from "./decide.js";

/** How the limit headers are written. */
export interface HeaderStyle {
  /** `X-RateLimit-Reset` as seconds until the reset, or as the epoch second of it. */
  readonly reset: "seconds" | "unix";
  /** X-RateLimit-* and X-Request-Quota-*. */
  readonly xRateLimit: boolean;
  /** RateLimit and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers). */
  readonly ietf: boolean;
}

/**
 * `RateLimit-Policy`: every limit of a plan as an RFC 9651 List of Strings with the limit `q`
 * and the window `w` in seconds (a quota: the current period's length), in the plan's order.
 */
export function policyField(
  limits: ReadonlyArray<{ name: string; limit: number; windowMs: number }>,
) {
  return limits
    .map(
      ({ name, limit, windowMs }) =>
        `"${name}";q=${limit};w=${Math.max(1, Math.ceil(windowMs / 1000))}`,
    )
    .join(", ");
}

/** `RateLimit`: each limit's points remaining `r` and seconds to its reset `t`, as a List. */
function rateLimitField(decision: Decision): string {
  return decision.limits
    .map((state) => `"${state.name}";r=${state.remaining};t=${state.resetSeconds}`)
    .join(", ");
}

/**
 * Writes the limit headers into `headers` (lower-case names; they go on every response to the
 * request) and returns the 429 when the decision refuses (RFC 6585 §4, Retry-After RFC 9110
 * §10.2.3: whole seconds). `policy` is the plan's `RateLimit-Policy` value.
 */
export function renderDecision(
  decision: Decision,
  headers: Record<string, string>,
  style: HeaderStyle,
  policy: string,
): Reply | undefined {
  const { rate, quota } = decision;
  if (style.xRateLimit) {
    if (rate !== undefined) {
      headers["x-ratelimit-limit"] = rate.limitText;
      headers["x-ratelimit-remaining"] = String(rate.remaining);
      headers["x-ratelimit-reset"] = String(
        style.reset === "unix" ? rate.resetAt : rate.resetSeconds,
      );
    }
    if (quota !== undefined) {
      headers["x-request-quota-limit"] = quota.limitText;
      headers["x-request-quota-limit-remaining"] = String(quota.remaining);
    }
  }
  if (style.ietf) {
    headers["ratelimit-policy"] = policy;
    headers["ratelimit"] = rateLimitField(decision);
  }
  if (decision.allowed || decision.refusal === undefined) return undefined;
  const retryAfter = decision.retryAfter;
  const message =
    decision.refusal === "rate_limited"
      ? `the rate limit of ${decision.limit} per ${decision.window} is used up; retry after ${retryAfter} s`
      : `the quota of ${decision.limit} per ${decision.window} is used up; it renews in ${retryAfter} s`;
  return tooManyRequests(
    decision.refusal,
    message,
    retryAfter,
    decision.limit,
    decision.window,
    decision.policy,
  );
}

/**
 * A 429 on a proxied route: the JSON body names the limit (with `policy`, its name among the
 * plan's limits) and its window, and Retry-After (whole seconds) says when to come back.
 */
export function tooManyRequests(
  error: Refusal,
  message: string,
  retryAfter: number,
  limit: number,
  window: string,
  policy?: string,
): Reply {
  const body = { error, message, retry_after: retryAfter, limit, window };
  return {
    status: 429,
    headers: { "retry-after": String(retryAfter), "cache-control": "no-store" },
    body: policy === undefined ? body : { ...body, policy },
  };
}
