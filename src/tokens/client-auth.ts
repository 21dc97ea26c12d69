/**
 * Client authentication at the token endpoint: a secret presented successfully before is accepted
 * from memory (no scrypt, no wait); any other is verified with scrypt within the verification
 * bound, an unknown client id against the dummy record through the same bound, so it costs what a
 * wrong secret costs (OWASP API2:2023).
 */
import type { Clock } from "../clock.js";
import type { Metrics } from "../metrics.js";
import { verifySecret } from "./secrets.js";
import type { ClientRegistry } from "./settings.js";
import { BUSY, createWorkBound } from "./work-bound.js";

/** How long a verification may wait for its turn before the request is answered 503. */
export const VERIFY_WAIT_MS = 1000;

/** A client authentication's outcome: `busy` when no verification could start in time. */
export type ClientCheck = "accepted" | "refused" | "busy";

/** Checks client secrets against one registry. */
export interface ClientAuthenticator {
  check(clientId: string, secret: string): Promise<ClientCheck>;
}

/**
 * An authenticator over `registry`, running at most `concurrency` scrypt verifications at once;
 * `clock` times the wait and the memo's entries.
 */
export function createClientAuthenticator(
  registry: ClientRegistry,
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
    async check(clientId, secret) {
      const record = registry.secrets.get(clientId);
      if (record !== undefined && registry.remembered.knows(clientId, secret, clock.monotonic())) {
        counted("remembered");
        return "accepted";
      }
      const matches = await bound.run(() => verifySecret(secret, record ?? registry.dummy));
      if (matches === BUSY) {
        counted("busy");
        return "busy";
      }
      counted(matches ? "match" : "mismatch");
      if (record === undefined || !matches) return "refused";
      registry.remembered.remember(clientId, secret, clock.monotonic());
      return "accepted";
    },
  };
}
