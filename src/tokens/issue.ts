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

/** Signs an access token for `clientId` at `nowMs` (epoch milliseconds) carrying `grant`. */
export async function issueToken(
  settings: TokenSettings,
  clientId: string,
  nowMs: number,
  grant: Grant,
): Promise<IssuedToken> {
  const { current } = settings.keys;
  const iat = Math.floor(nowMs / 1000);
  // RFC 9068 §2.1: typ at+jwt, so an ID token or another JWT made with the key is not taken for
  // an access token; §2.2: iss, exp, aud, sub, client_id, iat and jti; §2.2.3: scope when granted.
  const claims =
    grant.scope === undefined
      ? { client_id: clientId }
      : { client_id: clientId, scope: grant.scope };
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
