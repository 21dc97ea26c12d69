/**
 * Client authentication at the token endpoint: a secret presented successfully before is accepted
 * from memory (no scrypt, no wait); any other is verified with scrypt within the verification
 * bound, an unknown client id against the dummy record through the same bound, so it costs what a
 * wrong secret costs (OWASP API2:2023). A client assertion's signature check (private_key_jwt)
 * runs within the same bound, so a flood of forged assertions cannot take more than it either.
 */
import type { Clock } from "../clock.js";
import type { Metrics } from "../metrics.js";
import type { RememberedSecrets } from "./remembered.js";
import { verifySecret } from "./secrets.js";
import type { ClientRegistry } from "./settings.js";
import { BUSY, createWorkBound } from "./work-bound.js";
import {
  AssertionRejected,
  assertedClient,
  verifyAssertion,
  type AssertionSettings,
  type VerifiedAssertion,
} from "./assertion.js";

/** How long a verification may wait for its turn before the request is answered 503. */
export const VERIFY_WAIT_MS = 1000;

/** A client authentication's outcome: `busy` when no verification could start in time. */
export type ClientCheck = "accepted" | "refused" | "busy";

/** Checks client secrets and assertions against one registry. */
export interface ClientAuthenticator {
  /**
   * Whether `secret` is the one `clientId` presented successfully before: accepted without a
   * verification, a turn in the bound, or a failed attempt counted against the address.
   */
  recall(clientId: string, secret: string): boolean;
  /** Verifies a secret that `recall` does not know, within the bound. */
  check(clientId: string, secret: string): Promise<ClientCheck>;
  /**
   * Verifies a client assertion at `nowMs` (whether its `jti` was used before is not asked here);
   * refused with the rule it broke, for the answer, the log and the metrics.
   */
  checkAssertion(
    assertion: string,
    nowMs: number,
  ): Promise<VerifiedAssertion | AssertionRejected | "busy">;
}

/**
 * An authenticator over `registry`, remembering the secrets that match in `remembered`, running at
 * most `concurrency` verifications (scrypt or a signature) at once; `clock` times the wait and the
 * memo's entries.
 */
export function createClientAuthenticator(
  registry: ClientRegistry,
  remembered: RememberedSecrets,
  assertions: AssertionSettings,
  concurrency: number,
  clock: Clock,
  metrics: Metrics,
): ClientAuthenticator {
  const bound = createWorkBound(
    concurrency,
    VERIFY_WAIT_MS,
    clock,
    metrics.secretVerificationsWaiting,
  );
  const counted = (result: "match" | "mismatch" | "remembered" | "busy"): void =>
    metrics.secretVerifications.inc({ result });

  return {
    recall(clientId, secret) {
      const known =
        registry.secrets.has(clientId) && remembered.knows(clientId, secret, clock.monotonic());
      if (known) counted("remembered");
      return known;
    },
    async check(clientId, secret) {
      const record = registry.secrets.get(clientId);
      const matches = await bound.run(() => verifySecret(secret, record ?? registry.dummy));
      if (matches === BUSY) {
        counted("busy");
        return "busy";
      }
      counted(matches ? "match" : "mismatch");
      if (record === undefined || !matches) return "refused";
      remembered.remember(clientId, secret, clock.monotonic());
      return "accepted";
    },
    async checkAssertion(assertion, nowMs) {
      try {
        // The payload is decoded without the bound (it is cheap): an assertion naming no
        // private_key_jwt client never waits for a turn.
        const clientId = assertedClient(assertion, registry);
        const verified = await bound.run(() =>
          verifyAssertion(assertion, clientId, registry, assertions, nowMs),
        );
        return verified === BUSY ? "busy" : verified;
      } catch (error) {
        if (error instanceof AssertionRejected) return error;
        throw error;
      }
    },
  };
}
