/** What verifying a bearer token yields: the token's facts, or the rule it broke. */
import { errors } from "jose";
import type { GrantedScopes } from "../core/context.js";
import type { TokenRule } from "./refusal-reasons.js";

/**
 * Why a token was refused: `reason` names the rule (its words are in BEARER_REFUSALS); the
 * message says more for a debugging reader and never reaches the client's answer.
 */
export class TokenRejected extends Error {
  constructor(
    readonly reason: TokenRule,
    message: string,
  ) {
    super(message);
    this.name = "TokenRejected";
  }
}

// The rule a failed claim check broke, by the claim jose names (JWTClaimValidationFailed.claim):
// a missing or ill-typed claim is `claims`, except `iss` and `aud`, which name who the token is
// from and for whether absent or wrong.
function claimRule(failed: errors.JWTClaimValidationFailed): TokenRule {
  if (failed.claim === "iss") return "issuer";
  if (failed.claim === "aud") return "audience";
  if (failed.claim === "typ") return "typ";
  if (failed.reason !== "check_failed") return "claims";
  // `nbf` or `iat` in the future (beyond the tolerance); another check is a wrong value (`sub`).
  return failed.claim === "nbf" || failed.claim === "iat" ? "not_yet_valid" : "claims";
}

/** The refusal for an error jose raised while verifying a token (RFC 7515, RFC 7519). */
export function rejectionOf(error: unknown): TokenRejected {
  if (error instanceof TokenRejected) return error;
  const message = (error as Error).message;
  // A JWTExpired is `exp` in the past, or an `iat` older than the token's maximum age.
  if (error instanceof errors.JWTExpired) return new TokenRejected("expired", message);
  if (error instanceof errors.JWTClaimValidationFailed) {
    return new TokenRejected(claimRule(error), message);
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return new TokenRejected("algorithm", message);
  // A header or payload that is not JSON, no `alg`, an unencoded payload, an unknown `crit`.
  if (
    error instanceof errors.JWSInvalid ||
    error instanceof errors.JWTInvalid ||
    error instanceof errors.JOSENotSupported
  ) {
    return new TokenRejected("not_a_jwt", message);
  }
  // A signature that does not verify, and a key that cannot verify it (several keys fit a token
  // without `kid`, an RSA key under 2048 bits): either way no key vouches for the token.
  return new TokenRejected("signature", message);
}

/**
 * What a verified token says, read once: its client, its issuer, its scopes, its `jti`, and
 * until when it is accepted (epoch ms).
 */
export interface VerifiedToken {
  /** The client claim as the token carries it (X-Client-Id). */
  readonly clientId: string;
  /** The issuer's name: `own` for gatehouse's tokens, else a `trusted_issuers` name. */
  readonly issuer: string;
  /** The client's plan and counters key: its id for an own client, `<issuer>:<id>` else. */
  readonly clientKey: string;
  readonly scopes: GrantedScopes;
  /** "" for a provider's token without one (revocation is the provider's). */
  readonly jti: string;
  readonly untilMs: number;
  /** The thumbprint of the key a DPoP-bound token is bound to (`cnf.jkt`); undefined if unbound. */
  readonly jkt: string | undefined;
}

// RFC 7638 with SHA-256: 32 bytes in base64url.
const THUMBPRINT = /^[A-Za-z0-9_-]{43}$/;

/**
 * The key a token is bound to (RFC 9449 §6.1 `cnf.jkt`), or undefined for a bearer token. A `cnf`
 * of another kind (RFC 8705's certificate `x5t#S256`) is refused: gatehouse cannot check it, and
 * a bound token must not pass as a bearer one.
 */
export function boundKeyOf(cnf: unknown): string | undefined {
  if (cnf === undefined) return undefined;
  if (typeof cnf !== "object" || cnf === null || Array.isArray(cnf)) {
    throw new TokenRejected("binding", "cnf must be a JSON object");
  }
  const { jkt, ...rest } = cnf as Record<string, unknown>;
  if (Object.keys(rest).length > 0 || jkt === undefined) {
    throw new TokenRejected(
      "binding",
      "the token is bound by a confirmation method other than jkt",
    );
  }
  if (typeof jkt !== "string" || !THUMBPRINT.test(jkt)) {
    throw new TokenRejected("binding", "cnf.jkt must be a SHA-256 JWK thumbprint");
  }
  return jkt;
}

/** The scopes of a token that carries none. */
export const NO_SCOPES: GrantedScopes = Object.freeze({ text: "", names: new Set<string>() });
