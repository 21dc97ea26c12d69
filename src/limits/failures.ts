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
 *
 * A token request's attempt is counted before its credentials are checked, so concurrent guesses
 * cannot all slip in below the limit; until it is settled it is also counted as in flight, in a
 * second counter of the same store, so every replica tells the failures that happened from the
 * attempts still being checked. Attempts in flight never refuse with a 429: an attempt that finds
 * the rest of the budget held by them is told so (`crowded`) and waits for one to settle.
 */
import type { Clock } from "../clock.js";
import type { FailureRule } from "../tokens/settings.js";
import { addressKey } from "./client-key.js";
import type { Counted, CounterStore, Slot, Where } from "./counters.js";
import type { Outage } from "./outage.js";

/** A failure-limit decision: go on, or refuse until `retryAfterSeconds` have passed. */
export interface FailureDecision {
  readonly allowed: boolean;
  /** Whole seconds, at least 1, when refused; 0 when allowed. */
  readonly retryAfterSeconds: number;
}

/** An attempt's decision, with where it was counted so that it can be settled. */
export interface AttemptDecision extends FailureDecision {
  /**
   * Not allowed, and not refused either: the attempts in flight from the address hold the rest of
   * its budget, so this one must wait for one of them to settle (`settled`).
   */
  readonly crowded: boolean;
  /** Undefined when nothing was counted (refused, crowded, or the store down under `open`). */
  readonly counted: { readonly subject: string; readonly where: Where } | undefined;
}

/** The failure limiter for one `tokens.failure_limit`. */
export interface FailureLimiter {
  /** Whether the address is already over the limit; counts nothing (used before reading the body). */
  peek(ip: string): Promise<FailureDecision>;
  /**
   * Counts an attempt from `ip`, in flight, before its credentials are checked; refused when the
   * address's failures are over the limit, crowded when attempts in flight hold the rest of it.
   */
  attempt(ip: string): Promise<AttemptDecision>;
  /**
   * Settles an allowed attempt: a failed guess stays counted; any other outcome (a success, or no
   * check made) is taken back, as successes are not counted.
   */
  settle(attempt: AttemptDecision, failed: boolean): Promise<void>;
  /**
   * Waits until an attempt from `ip` settles in this process (true) or `waitMs` passes (false).
   */
  settled(ip: string, waitMs: number): Promise<boolean>;
  /** Counts a refused bearer token against its address; the next `peek` tells whether it is over. */
  failed(ip: string): Promise<void>;
}

const ALLOWED: FailureDecision = Object.freeze({ allowed: true, retryAfterSeconds: 0 });
const UNCOUNTED: AttemptDecision = Object.freeze({
  ...ALLOWED,
  crowded: false,
  counted: undefined,
});
const CROWDED: AttemptDecision = Object.freeze({
  allowed: false,
  retryAfterSeconds: 0,
  crowded: true,
  counted: undefined,
});

function refused(msBeforeNext: number): FailureDecision {
  return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(msBeforeNext / 1000)) };
}

// The failures that happened, out of a read or count of [failures and attempts in flight, in
// flight]. An in-flight counter can outlive the failures' window that its attempts were counted
// in (it starts with the first attempt, the failures' with the first failure), so the difference
// is never taken below 0.
function happened(counted: Counted): number {
  return Math.max(0, (counted.counts[0] ?? 0) - (counted.counts[1] ?? 0));
}

/** Wakes the callers waiting for an address's attempts to settle, in this process. */
function createWaiters(clock: Clock) {
  const waiting = new Map<string, Set<(settled: boolean) => void>>();
  return {
    wait(subject: string, waitMs: number): Promise<boolean> {
      return new Promise((resolve) => {
        let set = waiting.get(subject);
        if (set === undefined) waiting.set(subject, (set = new Set()));
        const mine = set;
        const wake = (settled: boolean): void => {
          timer.cancel();
          mine.delete(wake);
          if (mine.size === 0 && waiting.get(subject) === mine) waiting.delete(subject);
          resolve(settled);
        };
        const timer = clock.after(waitMs, () => wake(false));
        mine.add(wake);
      });
    },
    // Every waiter tries again: one settled attempt may leave room for one, or (a secret now
    // remembered) for all of them.
    wakeAll(subject: string): void {
      for (const wake of [...(waiting.get(subject) ?? [])]) wake(true);
    },
  };
}

/**
 * Creates the limiter: `limit` failures per `windowMs` per client address, in `store` by the
 * clock `now`, waiting on `clock`; a call whose store fails is decided by `outage` (`open`:
 * allowed, uncounted; `closed`: the store's error is thrown).
 */
export function createFailureLimiter(
  store: CounterStore,
  rule: FailureRule,
  now: () => number,
  clock: Clock,
  outage: Outage,
): FailureLimiter {
  // The failures and the attempts in flight, then the attempts in flight alone; a bearer token's
  // failure counts in the first only.
  const failures: Slot = {
    name: `auth-failures:ip:${rule.windowMs}`,
    limit: rule.limit,
    ttlMs: rule.windowMs,
  };
  const inFlight: Slot = {
    name: `auth-in-flight:ip:${rule.windowMs}`,
    limit: rule.limit,
    ttlMs: rule.windowMs,
  };
  const both: readonly Slot[] = Object.freeze([failures, inFlight]);
  const failuresOnly: readonly Slot[] = Object.freeze([failures]);
  const inFlightOnly: readonly Slot[] = Object.freeze([inFlight]);
  const waiters = createWaiters(clock);
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
        const read = await store.read(addressKey(ip), both, nowMs);
        return happened(read) >= rule.limit ? refused((read.endsAt[0] ?? nowMs) - nowMs) : ALLOWED;
      }, ALLOWED);
    },
    attempt(ip) {
      return guarded(async () => {
        const nowMs = now();
        const subject = addressKey(ip);
        // Forced, and taken back when over: a refusal is never remembered (the Redis store's
        // local block), since the attempts in flight that caused it may settle a moment later.
        const result = await store.commit(subject, both, 1, true, nowMs);
        const counted = { subject, where: result.where };
        if ((result.counts[0] ?? 0) <= rule.limit) return { ...ALLOWED, crowded: false, counted };
        await store.takeBack(subject, both, 1, result.where, nowMs);
        if (happened(result) >= rule.limit) {
          return {
            ...refused((result.endsAt[0] ?? nowMs) - nowMs),
            crowded: false,
            counted: undefined,
          };
        }
        return CROWDED;
      }, UNCOUNTED);
    },
    async settle(attempt, failed) {
      if (attempt.counted === undefined) return;
      const { subject, where } = attempt.counted;
      try {
        await store.takeBack(subject, failed ? inFlightOnly : both, 1, where, now());
      } finally {
        waiters.wakeAll(subject);
      }
    },
    settled: (ip, waitMs) => waiters.wait(addressKey(ip), waitMs),
    failed(ip) {
      return guarded(async () => {
        await store.commit(addressKey(ip), failuresOnly, 1, true, now());
      }, undefined);
    },
  };
}
