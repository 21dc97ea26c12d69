/**
 * Verifies access tokens (RFC 9068 §4, RFC 8725) and remembers the verified ones until they
 * expire, so a client's requests pay one signature check per token rather than one per request.
 */
import { decodeJwt, jwtVerify, type JWTHeaderParameters } from "jose";
import { OWN_ISSUER_NAME } from "../config/issuers-schema.js";
import type { TokenSettings, TrustedIssuer } from "./settings.js";
import type { IssuerKeySet } from "./issuer-keys.js";
import { providerClientRefusal, verifyProviderToken } from "./provider-tokens.js";
import {
  boundKeyOf,
  NO_SCOPES,
  rejectionOf,
  TokenRejected,
  type VerifiedToken,
} from "./verified.js";
import type { KeyMaterial } from "./keys.js";
import type { GrantedScopes } from "../core/context.js";

export { TokenRejected, type VerifiedToken } from "./verified.js";

/** Verifies tokens for one configuration. */
export interface TokenVerifier {
  /** A token verified earlier and still valid at `nowMs`, or undefined. */
  cached(token: string, nowMs: number): VerifiedToken | undefined;
  /** Verifies `token` at `nowMs`; rejects with TokenRejected. */
  verify(token: string, nowMs: number): Promise<VerifiedToken>;
}

// RFC 9068 §2.2.3: `scope` is a space-separated string, read here once so that the cache holds
// the set and a cached request parses nothing.
function scopesOf(claim: unknown): GrantedScopes {
  if (claim === undefined || claim === "") return NO_SCOPES;
  if (typeof claim !== "string") throw new TokenRejected("claims", "scope must be a string");
  return { text: claim, names: new Set(claim.split(" ")) };
}

/** How many verified tokens are remembered; the oldest is forgotten first. */
export const VERIFIED_CACHE_SIZE = 10_000;

// RFC 7515 §7.1 compact serialisation, base64url without padding (RFC 7515 §2): jose would also
// take `<token>=`, a second spelling of the same token.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

// RFC 9068 §2.2: these are REQUIRED in an access token; iss and aud are checked by value.
const REQUIRED_CLAIMS = ["exp", "iat", "sub", "client_id", "jti"];

/** The key set of each trusted issuer; without it, only gatehouse's own tokens verify. */
export type KeySetFor = (issuer: TrustedIssuer) => IssuerKeySet;

// The issuer a token names, read before its signature is checked only to choose the keys (RFC
// 8725 §3.8: a token is checked with its own issuer's keys, never another's). A token whose
// payload is no JSON object is no JWT: an opaque token, or a JWE.
function issuerOf(token: string): unknown {
  try {
    return decodeJwt(token).iss;
  } catch (error) {
    throw new TokenRejected("not_a_jwt", (error as Error).message);
  }
}

/**
 * Whether `settings` still accept the tokens of client `clientId` of issuer `issuer` (`own` or a
 * `trusted_issuers` name), as the bearer stage would: a token outlives a config change, and a
 * client the config no longer lists, or lists under another issuer, is refused.
 */
export function acceptsClient(settings: TokenSettings, issuer: string, clientId: string): boolean {
  if (issuer === OWN_ISSUER_NAME) return settings.clients.ids.has(clientId);
  const trusted = settings.trustedIssuers.find((entry) => entry.name === issuer);
  return trusted !== undefined && providerClientRefusal(trusted, clientId) === undefined;
}

/** Verified tokens by their text, each until it stops being accepted. */
export interface VerifiedCache {
  /** The facts of `token`, verified before and still accepted at `nowMs`, or undefined. */
  get(token: string, nowMs: number): VerifiedToken | undefined;
  /** Remembers `token`'s facts; the oldest entry is forgotten first once the cache is full. */
  set(token: string, entry: VerifiedToken): void;
}

/** An empty cache of at most `size` tokens. */
export function createVerifiedCache(size = VERIFIED_CACHE_SIZE): VerifiedCache {
  // Valid until min(exp, iat + maxTokenAge) plus the tolerance, as jose itself would judge.
  const verified = new Map<string, VerifiedToken>();
  return {
    get(token, nowMs) {
      const entry = verified.get(token);
      if (entry === undefined) return undefined;
      if (nowMs < entry.untilMs) return entry;
      verified.delete(token);
      return undefined;
    },
    set(token, entry) {
      if (verified.size >= size) {
        const oldest = verified.keys().next();
        if (!oldest.done) verified.delete(oldest.value);
      }
      verified.set(token, entry);
    },
  };
}

/**
 * Creates a verifier for the settings of one snapshot, remembering what it verifies in `cache`
 * (its own, unless given one that outlives the snapshot: caches.ts).
 */
export function createTokenVerifier(
  settings: TokenSettings,
  keySetFor?: KeySetFor,
  cache: VerifiedCache = createVerifiedCache(),
): TokenVerifier {
  const { keys, clockToleranceSeconds, ttlSeconds } = settings;
  const algorithms = [keys.alg];

  // RFC 8725 §3.10: a key is chosen only by exact kid; jku, x5u and jwk headers are never used.
  const keyFor = (header: JWTHeaderParameters): KeyMaterial => {
    const key = header.kid === undefined ? undefined : keys.byKid.get(header.kid);
    if (key === undefined) throw new TokenRejected("unknown_kid", "no key has this token's kid");
    return key;
  };

  const byIss = new Map(settings.trustedIssuers.map((issuer) => [issuer.issuer, issuer]));

  async function verifyOwn(token: string, nowMs: number): Promise<VerifiedToken> {
    let payload;
    try {
      ({ payload } = await jwtVerify(token, keyFor, {
        algorithms,
        typ: "at+jwt",
        issuer: settings.issuer,
        // RFC 7519 §4.1.3, RFC 8707: an `aud` array is accepted when it holds ours.
        audience: settings.audience,
        clockTolerance: clockToleranceSeconds,
        // RFC 8725 §3.10: without it jose accepts an iat in the future.
        maxTokenAge: ttlSeconds,
        requiredClaims: REQUIRED_CLAIMS,
        currentDate: new Date(nowMs),
      }));
    } catch (error) {
      throw rejectionOf(error);
    }
    const clientId = payload.client_id;
    if (typeof clientId !== "string" || clientId !== payload.sub) {
      throw new TokenRejected("claims", "client_id must be a string equal to sub");
    }
    const scopes = scopesOf(payload.scope);
    const exp = payload.exp as number;
    const iat = payload.iat as number;
    const untilMs = (Math.min(exp, iat + ttlSeconds) + clockToleranceSeconds) * 1000;
    // RFC 9068 §2.2 requires jti (checked above); RFC 7009 revokes a token by it.
    const jti = String(payload.jti);
    const jkt = boundKeyOf(payload.cnf);
    return { clientId, issuer: OWN_ISSUER_NAME, clientKey: clientId, scopes, jti, untilMs, jkt };
  }

  const verifyAny = (token: string, nowMs: number): Promise<VerifiedToken> => {
    const iss = issuerOf(token);
    if (iss === settings.issuer && settings.ownTokens) return verifyOwn(token, nowMs);
    const issuer = typeof iss === "string" ? byIss.get(iss) : undefined;
    if (issuer === undefined || keySetFor === undefined) {
      throw new TokenRejected("issuer", "the token's issuer is not trusted");
    }
    return verifyProviderToken(issuer, keySetFor(issuer), token, nowMs, clockToleranceSeconds);
  };

  return {
    cached: (token, nowMs) => cache.get(token, nowMs),
    async verify(token, nowMs) {
      if (!COMPACT_JWS.test(token)) {
        throw new TokenRejected("not_a_jwt", "the token is not a compact JWS");
      }
      const entry = await verifyAny(token, nowMs);
      cache.set(token, entry);
      return entry;
    },
  };
}
