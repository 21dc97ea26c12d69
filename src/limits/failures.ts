/**
 * Counts failed client authentications at the token endpoint, per client IP and per client id
 * (RFC 6749 §2.3.1: the server MUST protect against brute force), and refused bearer tokens per
 * client IP (OWASP API4:2023: a flood of forged tokens would otherwise cost a signature check
 * each). An IP is counted by its `addressKey`, as the anonymous plan counts it: an IPv6 client
 * rotating addresses inside its /64 stays in one bucket (BAD_INPUTS A23, D7). Counters come from
 * the limiter store, so they survive reloads and follow the store to Redis when one is configured.
 */
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import type { FailureRule } from "../config/tokens.js";
import { addressKey } from "./client-key.js";
import type { LimiterStore } from "./store.js";

/** A failure-limit decision: go on, or refuse until `retryAfterSeconds` have passed. */
export interface FailureDecision {
  readonly allowed: boolean;
  /** Whole seconds, at least 1, when refused; 0 when allowed. */
  readonly retryAfterSeconds: number;
}

/** Who an attempt is counted against: the client IP, and the client id when one was given. */
export interface AttemptKeys {
  readonly ip: string;
  readonly clientId: string | undefined;
}

/** The failure limiter for one `tokens.failure_limit`. */
export interface FailureLimiter {
  /** Whether the IP is already over the limit; counts nothing (used before reading the body). */
  peek(ip: string): Promise<FailureDecision>;
  /**
   * Counts an attempt before its secret is checked, so concurrent guesses cannot all slip in
   * below the limit; refused when the IP or the client id is then over the limit.
   */
  attempt(keys: AttemptKeys): Promise<FailureDecision>;
  /** Takes back the attempt of a client that authenticated: successes are not counted. */
  succeeded(keys: AttemptKeys): Promise<void>;
  /** Counts a refused bearer token against its IP; the next `peek` tells whether it is over. */
  failed(ip: string): Promise<void>;
}

const ALLOWED: FailureDecision = Object.freeze({ allowed: true, retryAfterSeconds: 0 });

/** Client ids are counted case-folded and trimmed, so `Client-A` and ` client-a` share a bucket. */
export function failureKeyForClient(clientId: string): string {
  return clientId.trim().toLowerCase();
}

function refused(msBeforeNext: number): FailureDecision {
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(msBeforeNext / 1000)) };
}

/** Creates the limiter: `limit` failures per `windowMs`, counted per IP and per client id. */
export function createFailureLimiter(store: LimiterStore, rule: FailureRule): FailureLimiter {
  const byIp = store.limiter({
    name: "auth-failures:ip",
    points: rule.limit,
    durationMs: rule.windowMs,
  });
  const byClient = store.limiter({
    name: "auth-failures:client",
    points: rule.limit,
    durationMs: rule.windowMs,
  });
  const targets = (keys: AttemptKeys): Array<[RateLimiterAbstract, string]> => {
    const ip: [RateLimiterAbstract, string] = [byIp, addressKey(keys.ip)];
    return keys.clientId === undefined
      ? [ip]
      : [ip, [byClient, failureKeyForClient(keys.clientId)]];
  };

  return {
    async peek(ip) {
      const res = await byIp.get(addressKey(ip));
      return res !== null && res.consumedPoints >= rule.limit ? refused(res.msBeforeNext) : ALLOWED;
    },
    async attempt(keys) {
      const counts = await Promise.all(targets(keys).map(([limiter, key]) => limiter.penalty(key)));
      const over = counts.filter((res) => res.consumedPoints > rule.limit);
      if (over.length === 0) return ALLOWED;
      // Retry-After: when the last window that refuses has ended.
      return refused(Math.max(...over.map((res) => res.msBeforeNext)));
    },
    async succeeded(keys) {
      await Promise.all(targets(keys).map(([limiter, key]) => limiter.reward(key)));
    },
    async failed(ip) {
      await byIp.penalty(addressKey(ip));
    },
  };
}
