/**
 * The key a token names, looked up as gatehouse looks it up: among its own (tokens.signing and
 * previous_keys), or in a trusted issuer's JWKS, fetched once as a running gatehouse fetches it.
 */
import { createLocalJWKSet } from "jose";
import { systemClock } from "../clock.js";
import type { Snapshot } from "../config/snapshot.js";
import { fetchKeys, KeysFetchFailed } from "../tokens/issuer-fetch.js";
import { usableKeys, type IssuerKeySet, type KidAnswer } from "../tokens/issuer-keys.js";
import type { TrustedIssuer } from "../tokens/settings.js";

/** Whether a key with the token's `kid` is one of its issuer's. */
export interface KeyFact {
  /** true or false; null when it could not be looked up. */
  readonly found: boolean | null;
  readonly note: string;
}

/** One trusted issuer's keys, fetched once as a running gatehouse fetches them. */
export interface FetchedKeys {
  readonly set: IssuerKeySet;
  /** How many of the JWKS's members gatehouse may verify with. */
  readonly count: number;
  /** Why the fetch failed; undefined when it succeeded. */
  readonly failure: string | undefined;
}

// The command fetches once: a kid the fetch did not bring is unknown, and after a failed fetch
// the keys are unavailable, as a running gatehouse would find them.
const UNAVAILABLE: KidAnswer = { waiting: "unavailable", retryAfterSeconds: 1 };

/**
 * The keys of `issuer`, fetched once, as the set the verifier reads: a running gatehouse's
 * refetch for an unknown kid would be this same fetch again.
 */
export async function fetchOnce(issuer: TrustedIssuer): Promise<FetchedKeys> {
  try {
    const usable = usableKeys(await fetchKeys(issuer, systemClock), issuer.algorithms);
    const kids = new Set(usable.keys.flatMap((jwk) => (jwk.kid === undefined ? [] : [jwk.kid])));
    const set: IssuerKeySet = {
      chooser: createLocalJWKSet(usable),
      hasKid: (kid) => kids.has(kid),
      fresh: true,
      retryAfterSeconds: () => 1,
      lookup: (kid) => Promise.resolve(kids.has(kid) ? "known" : "unknown"),
    };
    return { set, count: usable.keys.length, failure: undefined };
  } catch (error) {
    const set: IssuerKeySet = {
      chooser: undefined,
      hasKid: () => false,
      fresh: false,
      retryAfterSeconds: () => 1,
      lookup: () => Promise.resolve(UNAVAILABLE),
    };
    const message = (error as Error).message;
    return {
      set,
      count: 0,
      failure: error instanceof KeysFetchFailed ? `${error.result}: ${message}` : message,
    };
  }
}

function keysSource(issuer: TrustedIssuer): string {
  return issuer.jwksUri === "" ? `discovered from ${issuer.issuer}` : `jwks_uri ${issuer.jwksUri}`;
}

/** What the fetched keys of `issuer` say of the token's `kid`. */
export function providerKeyFact(issuer: TrustedIssuer, kid: unknown, keys: FetchedKeys): KeyFact {
  const where = `${issuer.name}'s JWKS (${keysSource(issuer)})`;
  if (keys.failure !== undefined) {
    return {
      found: null,
      note: `the keys of ${issuer.name} cannot be fetched (${keys.failure}); a running gatehouse keeps the keys it fetched last, and answers 503 for a kid it does not have`,
    };
  }
  if (typeof kid !== "string") {
    return {
      found: null,
      note: `the token names no kid: a key is chosen by alg among the ${keys.count} usable keys of ${where}`,
    };
  }
  return keys.set.hasKid(kid)
    ? { found: true, note: `kid ${kid} is in ${where}` }
    : {
        found: false,
        note: `no key with kid ${kid} among the ${keys.count} usable keys of ${where}`,
      };
}

/** Whether `kid` is one of gatehouse's own keys under `config`. */
export function ownKeyFact(config: Snapshot, kid: unknown): KeyFact {
  const { keys, ephemeralKey } = config.tokens;
  const { signing, previous_keys: previous } = config.file.tokens;
  if (ephemeralKey) {
    return {
      found: null,
      note: "tokens.signing names no key: a running gatehouse signs with a key it generated at start, which only that process has; its tokens cannot be checked offline",
    };
  }
  const current =
    signing.algorithm === "HS256" ? "tokens.signing.secret_env" : "tokens.signing.key_file";
  if (typeof kid !== "string") {
    return { found: false, note: "the token names no kid (gatehouse's own tokens always do)" };
  }
  if (kid === keys.current.kid) return { found: true, note: `kid ${kid} is the key of ${current}` };
  if (keys.byKid.has(kid))
    return { found: true, note: `kid ${kid} is one of tokens.previous_keys` };
  const also = previous.length === 0 ? "" : ` and ${previous.length} tokens.previous_keys`;
  return { found: false, note: `no key with kid ${kid}: the keys are ${current}'s${also}` };
}
