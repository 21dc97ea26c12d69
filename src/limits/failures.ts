/**
 * Counts failed client authentications at the token endpoint and refused bearer tokens, per
 * client address (RFC 6749 §2.3.1: the server MUST protect against brute force; OWASP API4:2023:
 * a flood of forged tokens would otherwise cost a signature check each). Never per client id: a
 * client id is public (every token's `sub`), and counting by it would let anyone lock that client
 * out (OWASP Authentication Cheat Sheet, account lockout). An address is counted by its
 * `addressKey`, as the anonymous plan counts it: an IPv6 client rotating addresses inside its /64
 * stays in one bucket. Counters come from the limiter store, so they survive reloads and follow
 * the store to Redis when one is configured; when the store cannot be reached, `on_outage`
 * decides, as for every limit.
 */
import type { FailureRule } from "../tokens/settings.js";
import { addressKey } from "./client-key.js";
import type { CounterStore, Slot, Where } from "./counters.js";
import type { Outage } from "./outage.js";

/** A failure-limit decision: go on, or refuse until `retryAfterSeconds` have passed. */
export interface FailureDecision {
  readonly allowed: boolean;
  /** Whole seconds, at least 1, when refused; 0 when allowed. */
  readonly retryAfterSeconds: number;
}

/** An attempt's decision, with where it was counted so that a success can be taken back. */
export interface AttemptDecision extends FailureDecision {
  /** Undefined when nothing was counted (the store was down under `on_outage: open`). */
  readonly counted: { readonly subject: string; readonly where: Where } | undefined;
}

/** The failure limiter for one `tokens.failure_limit`. */
export interface FailureLimiter {
  /** Whether the address is already over the limit; counts nothing (used before reading the body). */
  peek(ip: string): Promise<FailureDecision>;
  /**
   * Counts an attempt from `ip` before its secret is checked, so concurrent guesses cannot all
   * slip in below the limit; refused when the address is then over the limit.
   */
  attempt(ip: string): Promise<AttemptDecision>;
  /** Takes back an attempt that was not a failed guess: successes are not counted. */
  succeeded(attempt: AttemptDecision): Promise<void>;
  /** Counts a refused bearer token against its address; the next `peek` tells whether it is over. */
  failed(ip: string): Promise<void>;
}

const ALLOWED: FailureDecision = Object.freeze({ allowed: true, retryAfterSeconds: 0 });
const UNCOUNTED: AttemptDecision = Object.freeze({ ...ALLOWED, counted: undefined });

function refused(msBeforeNext: number): FailureDecision {
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(msBeforeNext / 1000)) };
}

/**
 * Creates the limiter: `limit` failures per `windowMs` per client address, in `store` by the
 * clock `now`; a call whose store fails is decided by `outage` (`open`: allowed, uncounted;
 * `closed`: the store's error is thrown).
 */
export function createFailureLimiter(
  store: CounterStore,
  rule: FailureRule,
  now: () => number,
  outage: Outage,
): FailureLimiter {
  const slots: readonly Slot[] = Object.freeze([
    { name: `auth-failures:ip:${rule.windowMs}`, limit: rule.limit, ttlMs: rule.windowMs },
  ]);
  const guarded = async <T>(call: () => T | Promise<T>, uncounted: T): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      if (outage.passes()) return uncounted;
      throw error;
    }
  };

  return {
    peek(ip) {
      return guarded(async () => {
        const nowMs = now();
        const read = await store.read(addressKey(ip), slots, nowMs);
        const count = read.counts[0] ?? 0;
        return count >= rule.limit ? refused((read.endsAt[0] ?? nowMs) - nowMs) : ALLOWED;
      }, ALLOWED);
    },
    attempt(ip) {
      return guarded(async () => {
        const nowMs = now();
        const subject = addressKey(ip);
        // Counted whatever the limit says: every attempt is one more guess.
        const result = await store.commit(subject, slots, 1, true, nowMs);
        const counted = { subject, where: result.where };
        const count = result.counts[0] ?? 0;
        if (count <= rule.limit) return { ...ALLOWED, counted };
        return { ...refused((result.endsAt[0] ?? nowMs) - nowMs), counted };
      }, UNCOUNTED);
    },
    async succeeded(attempt) {
      if (attempt.counted === undefined) return;
      const { subject, where } = attempt.counted;
      await store.takeBack(subject, slots, 1, where, now());
    },
    failed(ip) {
      return guarded(async () => {
        await store.commit(addressKey(ip), slots, 1, true, now());
      }, undefined);
    },
  };
}
