/**
 * Access tokens of a trusted issuer (an organisation's identity provider): verified with that
 * issuer's keys only, under its pinned algorithms, audiences and client claim (RFC 9068 §4,
 * RFC 8725), and matched to a client the config lists for it or to the issuer's plan.
 */
import { errors, jwtVerify, type JWTHeaderParameters, type JWTPayload } from "jose";
import type { GrantedScopes } from "../core/context.js";
import type { TrustedIssuer } from "./settings.js";
import type { IssuerKeySet, KeyChooser, KidAnswer } from "./issuer-keys.js";
import {
  boundKeyOf,
  NO_SCOPES,
  rejectionOf,
  TokenRejected,
  type VerifiedToken,
} from "./verified.js";
import { mediaTypeOf, mediaTypes } from "./media-type.js";

/**
 * A provider's unknown `kid` that no fetch made since it was asked for has answered: 503, never
 * 401, since the token may be good. `reason` says why: `keys_unavailable` (the keys cannot be
 * fetched) or `unknown_kid` (the refetch waits for the cool-down to end).
 */
export class KeysUnavailable extends Error {
  constructor(
    readonly issuer: string,
    readonly retryAfterSeconds: number,
    readonly reason: "keys_unavailable" | "unknown_kid",
  ) {
    super(`the keys of ${issuer} hold no key for the token's kid yet`);
    this.name = "KeysUnavailable";
  }
}

// RFC 9068 §2.1 and §4: `at+jwt` (the media type's short form or full form), and `JWT`, which
// providers such as Entra ID and Auth0 write in access tokens; compared without regard to case
// (RFC 7515 §4.1.9 media types).
// RFC 9068 §2.1's at+jwt, or a plain JWT (RFC 7519 §5.1), each read as a media type.
const ACCEPTED_TYP = mediaTypes("at+jwt", "JWT");

// What a client id must look like to be written in X-Client-Id and a counter key: visible ASCII.
const CLIENT_ID = /^[\x21-\x7E]{1,256}$/;

// What the scopes header can carry (RFC 9110 §5.5): no control character, nothing beyond Latin-1.
const SCOPE_TEXT = /^[\x20-\x7e\x80-\xff]*$/;

function scopeText(payload: JWTPayload): string {
  // RFC 9068 §2.2.3 `scope`; Entra ID and Okta write `scp`, an array or a space-separated string.
  const claim = payload.scope !== undefined ? payload.scope : payload.scp;
  if (claim === undefined) return "";
  let text: string;
  if (typeof claim === "string") text = claim.trim();
  else if (Array.isArray(claim) && claim.every((name) => typeof name === "string")) {
    text = claim.join(" ");
  } else {
    throw new TokenRejected("claims", "scope must be a string (scp: a string or an array of them)");
  }
  if (!SCOPE_TEXT.test(text)) {
    throw new TokenRejected("claims", "scope holds a control character or one beyond Latin-1");
  }
  return text;
}

function grantedScopes(text: string, cap: ReadonlySet<string> | undefined): GrantedScopes {
  let names = text.split(/ +/).filter((name) => name !== "");
  // A listed client's `scopes` caps what the provider granted it.
  if (cap !== undefined) names = names.filter((name) => cap.has(name));
  return names.length === 0 ? NO_SCOPES : { text: names.join(" "), names: new Set(names) };
}

// RFC 9068 §2.2: `client_id`; many providers write only `azp` (OpenID Connect Core §2). A
// `client_id` present but unusable is refused, never replaced by `azp`.
function clientIdOf(payload: JWTPayload, claim: string | undefined): string {
  const value =
    claim !== undefined
      ? payload[claim]
      : payload.client_id !== undefined
        ? payload.client_id
        : payload.azp;
  if (typeof value !== "string" || !CLIENT_ID.test(value)) {
    throw new TokenRejected("claims", "the token names no usable client");
  }
  return value;
}

const UNKNOWN_KID = "no key of the issuer has this token's kid";

// What an unknown `kid` is answered: 401 once a good fetch made since it was asked for lacks it,
// 503 until then.
function unknownKid(issuer: TrustedIssuer, answer: Exclude<KidAnswer, "known">): Error {
  if (answer === "unknown") return new TokenRejected("unknown_kid", UNKNOWN_KID);
  const reason = answer.waiting === "cooldown" ? "unknown_kid" : "keys_unavailable";
  return new KeysUnavailable(issuer.name, answer.retryAfterSeconds, reason);
}

// What a token without `kid`, or one whose `alg` no key of its `kid` fits, is answered.
function noKeyFits(issuer: TrustedIssuer, keys: IssuerKeySet): Error {
  return keys.fresh
    ? new TokenRejected("unknown_kid", UNKNOWN_KID)
    : new KeysUnavailable(issuer.name, keys.retryAfterSeconds(), "keys_unavailable");
}

// RFC 8725 §3.10: a key only by exact `kid` among the issuer's own; jku, x5u and jwk are never
// used. An unknown `kid` asks for the keys again (the provider may have rotated).
function keyChooser(issuer: TrustedIssuer, keys: IssuerKeySet) {
  return async (header: JWTHeaderParameters, token: Parameters<KeyChooser>[1]) => {
    if (header.kid !== undefined && !keys.hasKid(header.kid)) {
      const answer = await keys.lookup(header.kid);
      if (answer !== "known") throw unknownKid(issuer, answer);
    }
    const chooser = keys.chooser;
    if (chooser === undefined) throw noKeyFits(issuer, keys);
    try {
      return await chooser(header, token);
    } catch (error) {
      // No member fits the header's alg and kid (a token without kid whose alg has no key).
      if (error instanceof errors.JWKSNoMatchingKey) throw noKeyFits(issuer, keys);
      throw error;
    }
  };
}

function checkHeaderAndTime(
  header: JWTHeaderParameters,
  payload: JWTPayload,
  nowS: number,
  toleranceS: number,
): void {
  if (header.typ !== undefined && !ACCEPTED_TYP.has(mediaTypeOf(header.typ) ?? "")) {
    throw new TokenRejected("typ", "typ must be at+jwt or JWT (any case, application/ or not)");
  }
  // jose checks iat only against a maximum age; an iat in the future is a forged or broken clock.
  if (payload.iat !== undefined && payload.iat > nowS + toleranceS) {
    throw new TokenRejected("not_yet_valid", "iat is in the future");
  }
}

// Why a provider's client is refused, in the words of its rule.
const CLIENT_REFUSALS = {
  client_unknown: "the issuer's client is not listed",
  client_id_collision:
    "the token's client id is one of gatehouse's own clients'; list it under its issuer to accept it",
} as const;

/**
 * The rule that refuses `issuer`'s client `clientId`, or undefined when the config accepts it:
 * listed under the issuer, or taken into the issuer's plan.
 */
export function providerClientRefusal(
  issuer: TrustedIssuer,
  clientId: string,
): keyof typeof CLIENT_REFUSALS | undefined {
  if (issuer.clients.has(clientId)) return undefined;
  if (issuer.plan === undefined) return "client_unknown";
  // The upstream reads X-Client-Id alone: an unlisted provider client with the id of one of
  // gatehouse's own, in any case, would reach it as that client. Listing it under the issuer says
  // it is meant.
  return issuer.ownClientIds.has(clientId.toLowerCase()) ? "client_id_collision" : undefined;
}

/** Verifies `token`, whose `iss` names `issuer`, at `nowMs`; rejects as the own verifier does. */
export async function verifyProviderToken(
  issuer: TrustedIssuer,
  keys: IssuerKeySet,
  token: string,
  nowMs: number,
  toleranceS: number,
): Promise<VerifiedToken> {
  let verified;
  try {
    verified = await jwtVerify(token, keyChooser(issuer, keys), {
      algorithms: [...issuer.algorithms],
      issuer: issuer.issuer,
      // RFC 7519 §4.1.3: an `aud` array is accepted when it holds one of the issuer's audiences.
      audience: [...issuer.audiences],
      clockTolerance: toleranceS,
      requiredClaims: ["exp"],
      currentDate: new Date(nowMs),
    });
  } catch (error) {
    throw error instanceof KeysUnavailable ? error : rejectionOf(error);
  }
  const { payload, protectedHeader } = verified;
  checkHeaderAndTime(protectedHeader, payload, nowMs / 1000, toleranceS);
  // RFC 9449 §6: a token bound to a key is good only with a proof of that key.
  const jkt = boundKeyOf(payload.cnf);
  const clientId = clientIdOf(payload, issuer.clientClaim);
  const refusal = providerClientRefusal(issuer, clientId);
  if (refusal !== undefined) throw new TokenRejected(refusal, CLIENT_REFUSALS[refusal]);
  const listed = issuer.clients.get(clientId);
  const text = scopeText(payload);
  return {
    clientId,
    issuer: issuer.name,
    clientKey: `${issuer.name}:${clientId}`,
    scopes: grantedScopes(text, listed?.scopeCap),
    jti: typeof payload.jti === "string" ? payload.jti : "",
    untilMs: ((payload.exp as number) + toleranceS) * 1000,
    jkt,
  };
}
