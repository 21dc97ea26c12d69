/** Issues access tokens: RFC 9068 JWTs signed with the configured key. */
import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";
import type { TokenSettings } from "./settings.js";
import type { Grant } from "./grants.js";

/** A token just issued, and its lifetime in seconds (`expires_in`). */
export interface IssuedToken {
  readonly token: string;
  readonly expiresIn: number;
}

/**
 * Signs an access token for `clientId` at `nowMs` (epoch milliseconds) carrying `grant`, bound to
 * the key of thumbprint `jkt` when there is one.
 */
export async function issueToken(
  settings: TokenSettings,
  clientId: string,
  nowMs: number,
  grant: Grant,
  jkt?: string,
): Promise<IssuedToken> {
  const { current } = settings.keys;
  const iat = Math.floor(nowMs / 1000);
  // RFC 9068 §2.1: typ at+jwt, so an ID token or another JWT made with the key is not taken for
  // an access token; §2.2: iss, exp, aud, sub, client_id, iat and jti; §2.2.3: scope when granted.
  // RFC 9449 §6.1: a DPoP-bound token names its key's thumbprint in cnf.jkt.
  const claims = {
    client_id: clientId,
    ...(grant.scope === undefined ? {} : { scope: grant.scope }),
    ...(jkt === undefined ? {} : { cnf: { jkt } }),
  };
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg: current.alg, kid: current.kid, typ: "at+jwt" })
    .setIssuer(settings.issuer)
    .setAudience(grant.audience as string | string[])
    .setSubject(clientId)
    .setIssuedAt(iat)
    .setExpirationTime(iat + settings.ttlSeconds)
    .setJti(randomUUID())
    .sign(current.signingKey);
  return { token, expiresIn: settings.ttlSeconds };
}
