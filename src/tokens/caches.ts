/**
 * What gatehouse has learnt to be good: the bearer tokens it verified and the client secrets that
 * matched. Both answer without the costly check, and without the failure limit's refusal, so they
 * are the reason many clients behind one address keep working while one of them fails. They hold
 * only under the keys, issuers and clients they were learnt under (`TokenSettings.trust`): a
 * reload that keeps those keeps them, any other starts them empty, so a removed client, a changed
 * secret or a rotated key is never answered from them.
 */
import type { TokenSettings } from "./settings.js";
import { createRememberedSecrets, type RememberedSecrets } from "./remembered.js";
import { createVerifiedCache, type VerifiedCache } from "./verify.js";

/** The verified tokens and remembered secrets of one trust. */
export interface TokenCaches {
  readonly trust: string;
  /** The bearer stage's verified tokens. */
  readonly verified: VerifiedCache;
  /** The token endpoint's secrets that matched. */
  readonly remembered: RememberedSecrets;
}

/** `previous` when `settings` trust what it was learnt under, else empty caches for them. */
export function tokenCachesFor(settings: TokenSettings, previous?: TokenCaches): TokenCaches {
  if (previous !== undefined && previous.trust === settings.trust) return previous;
  return {
    trust: settings.trust,
    verified: createVerifiedCache(),
    // A secret is trusted without a new check no longer than the token it earned lives.
    remembered: createRememberedSecrets(settings.ttlSeconds * 1000),
  };
}
