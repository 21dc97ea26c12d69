/**
 * Verifies a client assertion (private_key_jwt: RFC 7523 §2.2 and §3, RFC 7521 §4.2) with jose:
 * signed by one of the client's keys with an algorithm its key type allows, `iss` = `sub` = the
 * client id, `aud` the issuer alone, `exp` present and at most five minutes ahead, a `jti`. Whether
 * the `jti` was seen before is the caller's question (replay.ts).
 */
import { decodeJwt, errors, jwtVerify } from "jose";
import type { ClientRegistry } from "./settings.js";

/** RFC 7521 §4.2: the value of `client_assertion_type` for a JWT (RFC 7523 §2.2). */
export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** The longest an assertion may live from now: its `exp` is at most this far ahead. */
export const MAX_ASSERTION_SECONDS = 300;

/** An assertion that verified: its client, its `jti` and when it ends (epoch ms). */
export interface VerifiedAssertion {
  readonly clientId: string;
  readonly jti: string;
  /** `exp` plus the clock tolerance: until then the assertion could verify, so its jti is kept. */
  readonly untilMs: number;
}

/** Why an assertion was refused; the reason feeds metrics, never the client's answer. */
export class AssertionRejected extends Error {
  constructor(
    readonly reason: "malformed" | "unknown_client" | "invalid",
    message: string,
  ) {
    super(message);
    this.name = "AssertionRejected";
  }
}

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

// draft-ietf-oauth-rfc7523bis (explicit typing): an assertion may say what it is; any other typ
// is a JWT made for something else (an access token, an ID token) and is refused.
const ASSERTION_TYP = "client-authentication+jwt";

/** What checking assertions needs from the token settings. */
export interface AssertionSettings {
  readonly issuer: string;
  readonly clockToleranceSeconds: number;
}

/**
 * The client an assertion names (`sub`), read before its signature is checked so that the
 * client's keys can be chosen; throws AssertionRejected when it names no private_key_jwt client.
 */
export function assertedClient(assertion: string, registry: ClientRegistry): string {
  if (!COMPACT_JWS.test(assertion)) {
    throw new AssertionRejected("malformed", "the assertion is not a compact JWS");
  }
  let sub: unknown;
  try {
    ({ sub } = decodeJwt(assertion));
  } catch {
    throw new AssertionRejected("malformed", "the assertion's payload does not decode");
  }
  if (typeof sub !== "string" || !registry.assertionKeys.has(sub)) {
    throw new AssertionRejected("unknown_client", "no private_key_jwt client has this sub");
  }
  return sub;
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
  if (keys === undefined) {
    throw new AssertionRejected("unknown_client", "no private_key_jwt client has this id");
  }
  const tolerance = settings.clockToleranceSeconds;
  let payload;
  let typ: string | undefined;
  try {
    ({
      payload,
      protectedHeader: { typ },
    } = await jwtVerify(assertion, keys.keySet, {
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
    const expired = error instanceof errors.JWTExpired;
    throw new AssertionRejected("invalid", expired ? "expired" : (error as Error).message);
  }
  if (typ !== undefined && typ !== ASSERTION_TYP) {
    throw new AssertionRejected("invalid", `typ must be ${ASSERTION_TYP} or absent`);
  }
  // RFC 7523 §3 item 3 and draft-ietf-oauth-rfc7523bis (audience injection): the issuer
  // identifier is the only audience accepted; the token endpoint URL, or the issuer beside other
  // audiences, could be an assertion the client was led to make for another server.
  const { aud } = payload;
  const audience = Array.isArray(aud) && aud.length === 1 ? aud[0] : aud;
  if (audience !== settings.issuer) {
    throw new AssertionRejected("invalid", "aud must be the issuer identifier alone");
  }
  const exp = payload.exp as number;
  if (exp > Math.floor(nowMs / 1000) + MAX_ASSERTION_SECONDS + tolerance) {
    throw new AssertionRejected("invalid", `exp is more than ${MAX_ASSERTION_SECONDS} s ahead`);
  }
  const { jti } = payload;
  if (typeof jti !== "string" || jti === "") {
    throw new AssertionRejected("invalid", "jti must be a non-empty string");
  }
  return { clientId, jti, untilMs: (exp + tolerance) * 1000 };
}
