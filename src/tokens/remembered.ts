/**
 * Successful secret verifications, remembered so that a client presenting its secret again costs
 * an HMAC instead of a scrypt derivation. What is kept is never the secret: an HMAC-SHA256 digest
 * of it under a random key made here, which is never written anywhere (logs, the state file,
 * /metrics) and dies with the process, so a digest seen outside it cannot be tested against
 * guesses. One digest per client id:
 * only a secret that matched the stored hash is remembered, and a client has one secret, so what
 * is kept is bounded by the configured clients whatever an attacker sends. An entry is forgotten
 * `ttlMs` after it was remembered; the whole memo belongs to one set of clients and their secrets
 * (caches.ts), so a config change to them (a new `secret_hash`) starts from nothing.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** Remembered successful verifications, per client id. */
export interface RememberedSecrets {
  /** Whether `secret` is the one `clientId` presented successfully in the last `ttlMs`. */
  knows(clientId: string, secret: string, nowMs: number): boolean;
  /** Remembers that `secret` matched `clientId`'s stored hash at `nowMs`. */
  remember(clientId: string, secret: string, nowMs: number): void;
}

interface Entry {
  readonly digest: Buffer;
  readonly at: number;
}

/** An empty memo whose entries live `ttlMs` (by the monotonic clock the caller reads). */
export function createRememberedSecrets(ttlMs: number): RememberedSecrets {
  const key = randomBytes(32);
  const entries = new Map<string, Entry>();
  const digest = (secret: string): Buffer => createHmac("sha256", key).update(secret).digest();
  return {
    knows(clientId, secret, nowMs) {
      const entry = entries.get(clientId);
      if (entry === undefined) return false;
      if (nowMs - entry.at >= ttlMs) {
        entries.delete(clientId);
        return false;
      }
      // Both digests are 32 bytes: the comparison's time does not depend on where they differ.
      return timingSafeEqual(entry.digest, digest(secret));
    },
    remember(clientId, secret, nowMs) {
      entries.set(clientId, { digest: digest(secret), at: nowMs });
    },
  };
}
