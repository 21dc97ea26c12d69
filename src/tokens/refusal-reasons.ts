/**
 * Why gatehouse refuses a bearer token: each rule by name, and what its refusal says in words.
 * `bearer_<rule>` is the `reason` of the request's access log line and of
 * gatehouse_auth_failures_total; the words are the 401's `error_description` (RFC 6750 §3) and
 * the body's `message`. The words are fixed per rule: nothing of the token, nor any value it
 * carries, is ever echoed, and every one stays within RFC 6750 §3's error_description characters.
 */

import { PROOF_RULES, type ProofRule } from "./dpop-proof.js";

/** A DPoP proof's refusal: `dpop_<rule>`, in the proof rule's words. */
type ProofRefusals = { readonly [R in ProofRule as `dpop_${R}`]: (typeof PROOF_RULES)[R] };

const PROOF_REFUSALS = Object.fromEntries(
  Object.entries(PROOF_RULES).map(([rule, words]) => [`dpop_${rule}`, words]),
) as ProofRefusals;

/** Every bearer refusal's rule and its words. */
export const BEARER_REFUSALS = {
  missing: "this route requires a bearer token",
  malformed: "the request's bearer credentials are malformed",
  not_a_jwt: "gatehouse verifies JWT access tokens only, and this token is not a JWT it can read",
  signature: "the token's signature does not verify with its issuer's keys",
  algorithm: "the token's alg is not one allowed for its issuer",
  expired: "the token has expired",
  not_yet_valid: "the token is not valid yet (nbf or iat is in the future)",
  issuer: "the token's issuer (iss) is not one gatehouse trusts",
  audience: "the token is not meant for this resource (aud)",
  unknown_kid: "no key of the token's issuer has its kid",
  typ: "the token's typ does not mark it as an access token",
  claims: "a claim the token needs is missing or malformed",
  binding: "the token is bound to its key by a method gatehouse does not check (cnf)",
  client_unknown: "the token's client is not one gatehouse lists",
  client_id_collision: "the client id is taken by another client",
  revoked: "the token has been revoked",
  insufficient_scope: "the token lacks the scopes this route needs",
  rate_limited: "too many refused bearer tokens from this address",
  keys_unavailable: "the keys of the token's issuer cannot be fetched",
  bound_as_bearer: "the token is bound to a key: send it with the DPoP scheme and a proof",
  not_bound: "the DPoP scheme is for a token bound to a key, and this token is not",
  dpop_required: "this route requires a DPoP-bound token and its proof",
  ...PROOF_REFUSALS,
} as const;

/** A bearer refusal's rule. */
export type BearerRefusal = keyof typeof BEARER_REFUSALS;

/** The rules that verifying a token can find broken; the others are the request's or the route's. */
export const TOKEN_RULES = [
  "not_a_jwt",
  "signature",
  "algorithm",
  "expired",
  "not_yet_valid",
  "issuer",
  "audience",
  "unknown_kid",
  "typ",
  "claims",
  "binding",
  "client_unknown",
  "client_id_collision",
] as const satisfies readonly BearerRefusal[];

/** A rule that verifying a token can find broken. */
export type TokenRule = (typeof TOKEN_RULES)[number];

/**
 * The rules refused 401 `invalid_token`: a token's own, a revoked token, and a token presented
 * against its binding (RFC 9449 §7.2: a bound token as Bearer, an unbound one as DPoP, a plain
 * one where the route requires DPoP).
 */
export const INVALID_TOKEN_RULES = [
  ...TOKEN_RULES,
  "revoked",
  "bound_as_bearer",
  "not_bound",
  "dpop_required",
] as const satisfies readonly BearerRefusal[];

/** A rule refused 401 `invalid_token`. */
export type InvalidTokenRule = (typeof INVALID_TOKEN_RULES)[number];

/** The `reason` a refusal is logged and counted with: `bearer_<rule>`. */
export function refusalReason(rule: BearerRefusal): `bearer_${BearerRefusal}` {
  return `bearer_${rule}`;
}
