/** The one place a limit decision becomes response headers and, when it refuses, the 429. */
import type { Reply } from "../pipeline/context.js";
import type { Decision } from "./decide.js";

/** How `X-RateLimit-Reset` is written. */
export type ResetStyle = "seconds" | "unix";

/**
 * Writes the limit headers into `headers` (lower-case names; they go on every response to the
 * request) and returns the 429 when the decision refuses (RFC 6585 §4, Retry-After RFC 9110
 * §10.2.3: whole seconds).
 */
export function renderDecision(
  decision: Decision,
  headers: Record<string, string>,
  resetStyle: ResetStyle,
): Reply | undefined {
  const { rate, quota } = decision;
  if (rate !== undefined) {
    headers["x-ratelimit-limit"] = rate.limitText;
    headers["x-ratelimit-remaining"] = String(rate.remaining);
    headers["x-ratelimit-reset"] = String(resetStyle === "unix" ? rate.resetAt : rate.resetSeconds);
  }
  if (quota !== undefined) {
    headers["x-request-quota-limit"] = quota.limitText;
    headers["x-request-quota-limit-remaining"] = String(quota.remaining);
  }
  if (decision.allowed || decision.refusal === undefined) return undefined;
  const retryAfter = decision.retryAfter;
  const message =
    decision.refusal === "rate_limited"
      ? `the rate limit of ${decision.limit} per ${decision.window} is used up; retry after ${retryAfter} s`
      : `the quota of ${decision.limit} per ${decision.window} is used up; it renews in ${retryAfter} s`;
  return tooManyRequests(decision.refusal, message, retryAfter, decision.limit, decision.window);
}

/**
 * A 429 on a proxied route (SPEC §4.4): the JSON body names the limit and its window, and
 * Retry-After (whole seconds) says when to come back.
 */
export function tooManyRequests(
  error: string,
  message: string,
  retryAfter: number,
  limit: number,
  window: string,
): Reply {
  return {
    status: 429,
    headers: { "retry-after": String(retryAfter), "cache-control": "no-store" },
    body: { error, message, retry_after: retryAfter, limit, window },
  };
}
