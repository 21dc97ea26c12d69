/**
 * Verifies a client assertion (private_key_jwt: RFC 7523 §2.2 and §3, RFC 7521 §4.2) with jose:
 * signed by one of the client's keys with an algorithm its key type allows, `iss` = `sub` = the
 * client id, `aud` the issuer alone, `exp` present and at most `tokens.assertion_max_lifetime`
 * ahead, a `jti`. Whether the `jti` was seen before is the caller's question (marks.ts).
 */
import { decodeJwt, errors, jwtVerify } from "jose";
import type { ClientKeys } from "./client-keys.js";
import type { ClientRegistry } from "./settings.js";
import { mediaTypeOf, mediaTypes } from "./media-type.js";

/** RFC 7521 §4.2: the value of `client_assertion_type` for a JWT (RFC 7523 §2.2). */
export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** An assertion that verified: its client, its `jti` and when it ends (epoch ms). */
export interface VerifiedAssertion {
  readonly clientId: string;
  readonly jti: string;
  /** `exp` plus the clock tolerance: until then the assertion could verify, so its jti is kept. */
  readonly untilMs: number;
}

/**
 * The rule an assertion broke: named in the refusal's `error_description`, its log line and its
 * metric (`assertion_<rule>`), a fixed set so the metric's labels stay bounded.
 */
export type AssertionRule =
  | "malformed"
  | "unknown_client"
  | "typ"
  | "alg"
  | "key"
  | "signature"
  | "issuer"
  | "claims"
  | "expired"
  | "not_yet_valid"
  | "audience"
  | "lifetime"
  | "jti"
  | "replay"
  | "other_client";

/**
 * Why an assertion was refused: the rule, a description that never quotes the assertion, and
 * the listed client it named, if any.
 */
export class AssertionRejected extends Error {
  constructor(
    readonly rule: AssertionRule,
    message: string,
    readonly client?: string,
  ) {
    super(message);
    this.name = "AssertionRejected";
  }
}

const UNKNOWN_CLIENT = new AssertionRejected(
  "unknown_client",
  "the client assertion's sub names no client that authenticates with private_key_jwt",
);

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

// draft-ietf-oauth-rfc7523bis (explicit typing) names client-authentication+jwt; RFC 7519 §5.1's
// JWT is what the MCP SDK, authlib and Spring send, and says nothing more than "a JWT". Any other
// typ is a JWT made for something else (an access token, an ID token) and is refused. Each is
// read as a media type: `jwt` and `application/JWT` are `JWT`.
const ASSERTION_TYPES = mediaTypes("client-authentication+jwt", "JWT");

/** What checking assertions needs from the token settings. */
export interface AssertionSettings {
  readonly issuer: string;
  readonly clockToleranceSeconds: number;
  /** `tokens.assertion_max_lifetime`: how far ahead of now an assertion's `exp` may lie. */
  readonly assertionMaxLifetimeSeconds: number;
}

/**
 * The client an assertion names (`sub`), read before its signature is checked so that the
 * client's keys can be chosen; throws AssertionRejected when it names no private_key_jwt client.
 */
export function assertedClient(assertion: string, registry: ClientRegistry): string {
  if (!COMPACT_JWS.test(assertion)) {
    throw new AssertionRejected("malformed", "the client assertion is not a compact JWS");
  }
  let sub: unknown;
  try {
    ({ sub } = decodeJwt(assertion));
  } catch {
    throw new AssertionRejected("malformed", "the client assertion's payload does not decode");
  }
  if (typeof sub !== "string" || !registry.assertionKeys.has(sub)) {
    throw UNKNOWN_CLIENT;
  }
  return sub;
}

type VerifyOptions = Parameters<typeof jwtVerify>[2];

/**
 * jwtVerify against the client's keys. RFC 7515 §4.1.4 makes `kid` optional: an assertion
 * without one (the MCP SDK sends none) is tried against each of the client's keys that fits its
 * `alg`, so a client rotating between two keys is not refused while both are listed.
 */
async function verifyWithKeys(assertion: string, keys: ClientKeys, options: VerifyOptions) {
  try {
    return await jwtVerify(assertion, keys.keySet, options);
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    for await (const key of error) {
      try {
        return await jwtVerify(assertion, key, options);
      } catch (failed) {
        if (!(failed instanceof errors.JWSSignatureVerificationFailed)) throw failed;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

// What jose's refusal means for the client, in the words of the rule it broke.
function rejection(error: unknown, keys: ClientKeys, client: string): AssertionRejected {
  if (error instanceof errors.JWTExpired) {
    return new AssertionRejected("expired", "the client assertion has expired (exp)", client);
  }
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.reason === "missing") {
      return new AssertionRejected(
        "claims",
        `the client assertion must carry the ${error.claim} claim`,
        client,
      );
    }
    if (error.claim === "iss" || error.claim === "sub") {
      return new AssertionRejected(
        "issuer",
        "the client assertion's iss and sub must both be the client id",
        client,
      );
    }
    if (error.claim === "nbf" || error.claim === "iat") {
      return new AssertionRejected(
        "not_yet_valid",
        `the client assertion's ${error.claim} is in the future`,
        client,
      );
    }
    return new AssertionRejected(
      "claims",
      `the client assertion's ${error.claim} claim is not valid`,
      client,
    );
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return new AssertionRejected(
      "signature",
      "the client assertion's signature does not verify with the client's keys",
      client,
    );
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return new AssertionRejected(
      "alg",
      `the client assertion's alg must be one its client's keys allow: ${keys.algorithms.join(", ")}`,
      client,
    );
  }
  if (error instanceof errors.JWKSNoMatchingKey) {
    return new AssertionRejected(
      "key",
      "no key of the client matches the client assertion's kid and alg",
      client,
    );
  }
  return new AssertionRejected(
    "malformed",
    "the client assertion is not a well-formed JWT",
    client,
  );
}

/** Verifies `assertion` for `clientId` at `nowMs`; rejects with AssertionRejected. */
export async function verifyAssertion(
  assertion: string,
  clientId: string,
  registry: ClientRegistry,
  settings: AssertionSettings,
  nowMs: number,
): Promise<VerifiedAssertion> {
  const keys = registry.assertionKeys.get(clientId);
  if (keys === undefined) throw UNKNOWN_CLIENT;
  const tolerance = settings.clockToleranceSeconds;
  let payload;
  let typ: unknown;
  try {
    ({
      payload,
      protectedHeader: { typ },
    } = await verifyWithKeys(assertion, keys, {
      algorithms: [...keys.algorithms],
      // RFC 7523 §3 items 1 and 2: iss and sub are the client id.
      issuer: clientId,
      subject: clientId,
      clockTolerance: tolerance,
      currentDate: new Date(nowMs),
      // RFC 7523 §3 items 3, 4 and 7 (jti required here, as the replay check needs it).
      requiredClaims: ["exp", "aud", "jti"],
    }));
  } catch (error) {
    throw rejection(error, keys, clientId);
  }
  if (typ !== undefined && !ASSERTION_TYPES.has(mediaTypeOf(typ) ?? "")) {
    throw new AssertionRejected(
      "typ",
      "the client assertion's typ must be client-authentication+jwt or JWT, or absent",
      clientId,
    );
  }
  // RFC 7523 §3 item 3 and draft-ietf-oauth-rfc7523bis (audience injection): the issuer
  // identifier is the only audience accepted; the token endpoint URL, or the issuer beside other
  // audiences, could be an assertion the client was led to make for another server.
  const { aud } = payload;
  const audience = Array.isArray(aud) && aud.length === 1 ? aud[0] : aud;
  if (audience !== settings.issuer) {
    throw new AssertionRejected(
      "audience",
      `the client assertion's aud must be the issuer identifier alone: ${settings.issuer}`,
      clientId,
    );
  }
  // RFC 7523 §3 item 4 lets a server refuse an exp unreasonably far in the future: its jti is
  // held until then, and an assertion taken before its use works until then.
  const exp = payload.exp as number;
  const longest = settings.assertionMaxLifetimeSeconds;
  if (exp > Math.floor(nowMs / 1000) + longest + tolerance) {
    throw new AssertionRejected(
      "lifetime",
      `the client assertion's exp must be at most ${longest} seconds ahead`,
      clientId,
    );
  }
  const { jti } = payload;
  if (typeof jti !== "string" || jti === "") {
    throw new AssertionRejected(
      "jti",
      "the client assertion's jti must be a non-empty string",
      clientId,
    );
  }
  // jose compares exp with now in whole seconds: the assertion verifies until the second its exp
  // and tolerance round up to, a fraction of a second in exp included. Held until then, in whole
  // milliseconds, as every store takes them.
  return { clientId, jti, untilMs: Math.ceil(exp + tolerance) * 1000 };
}
