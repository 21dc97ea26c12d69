/**
 * Counts failed client authentications at the token endpoint, per client IP and per client id
 * (RFC 6749 §2.3.1: the server MUST protect against brute force), and refused bearer tokens per
 * client IP (OWASP API4:2023: a flood of forged tokens would otherwise cost a signature check
 * each). An IP is counted by its `addressKey`, as the anonymous plan counts it: an IPv6 client
 * rotating addresses inside its /64 stays in one bucket. Counters come from
 * the limiter store, so they survive reloads and follow the store to Redis when one is configured.
 */
import type { FailureRule } from "../tokens/settings.js";
import { addressKey } from "./client-key.js";
import type { CounterStore, Slot, Where } from "./counters.js";

/** A failure-limit decision: go on, or refuse until `retryAfterSeconds` have passed. */
export interface FailureDecision {
  readonly allowed: boolean;
  /** Whole seconds, at least 1, when refused; 0 when allowed. */
  readonly retryAfterSeconds: number;
}

/** An attempt's decision, with what it counted so that a success can be taken back. */
export interface AttemptDecision extends FailureDecision {
  readonly counted: readonly CountedAttempt[];
}

/** One counted attempt: whose, and where the store counted it. */
interface CountedAttempt {
  readonly subject: string;
  readonly slots: readonly Slot[];
  readonly where: Where;
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
  attempt(keys: AttemptKeys): Promise<AttemptDecision>;
  /** Takes back the attempt of a client that authenticated: successes are not counted. */
  succeeded(attempt: AttemptDecision): Promise<void>;
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

/**
 * Creates the limiter: `limit` failures per `windowMs`, counted per IP and per client id, in
 * `store` by the clock `now`.
 */
export function createFailureLimiter(
  store: CounterStore,
  rule: FailureRule,
  now: () => number,
): FailureLimiter {
  const slot = (kind: string): readonly Slot[] =>
    Object.freeze([
      { name: `auth-failures:${kind}:${rule.windowMs}`, limit: rule.limit, ttlMs: rule.windowMs },
    ]);
  const byIp = slot("ip");
  const byClient = slot("client");
  const targets = (keys: AttemptKeys): Array<[string, readonly Slot[]]> => {
    const ip: [string, readonly Slot[]] = [addressKey(keys.ip), byIp];
    return keys.clientId === undefined
      ? [ip]
      : [ip, [`client-id:${failureKeyForClient(keys.clientId)}`, byClient]];
  };

  return {
    async peek(ip) {
      const nowMs = now();
      const read = await store.read(addressKey(ip), byIp, nowMs);
      const count = read.counts[0] ?? 0;
      return count >= rule.limit ? refused((read.endsAt[0] ?? nowMs) - nowMs) : ALLOWED;
    },
    async attempt(keys) {
      const nowMs = now();
      const subjects = targets(keys);
      // Counted whatever the limit says: every attempt is one more guess.
      const counts = await Promise.all(
        subjects.map(([subject, slots]) => store.commit(subject, slots, 1, true, nowMs)),
      );
      const counted = counts.map((result, i) => {
        const [subject, slots] = subjects[i] as [string, readonly Slot[]];
        return { subject, slots, where: result.where };
      });
      const over = counts.filter((result) => (result.counts[0] ?? 0) > rule.limit);
      if (over.length === 0) return { ...ALLOWED, counted };
      // Retry-After: when the last window that refuses has ended.
      const latest = Math.max(...over.map((result) => result.endsAt[0] ?? nowMs));
      return { ...refused(latest - nowMs), counted };
    },
    async succeeded(attempt) {
      const nowMs = now();
      await Promise.all(
        attempt.counted.map(({ subject, slots, where }) =>
          store.takeBack(subject, slots, 1, where, nowMs),
        ),
      );
    },
    async failed(ip) {
      await store.commit(addressKey(ip), byIp, 1, true, now());
    },
  };
}
