/**
 * DPoP (RFC 9449) as a client does it, for tests through real sockets: a key pair with its public
 * JWK and RFC 7638 thumbprint, proofs for one request signed with jose, access tokens bound to a
 * key (`cnf.jkt`) signed with the gatehouse's own key, and what a refusal looks like on the wire
 * and in the access log.
 */
import { createHash, createPublicKey, randomUUID } from "node:crypto";
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importPKCS8,
  SignJWT,
  type CryptoKey,
  type JWK,
} from "jose";
import { generateKeyPem } from "../../src/tokens/keys.js";
import { send, type ClientResponse } from "./client.js";
import { form, type TestClient } from "./tokens.js";
import type { TestGatehouse } from "./gatehouse.js";
import { DPOP_CHALLENGE } from "./challenges.js";

/** The `algs` of the DPoP challenge with the default proof algorithms. */
export const ALGS = 'algs="ES256 EdDSA Ed25519 PS256 RS256"';

/** A client's DPoP key: the pair, the public JWK a proof carries, and its thumbprint. */
export interface DpopKey {
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  readonly jwk: JWK;
  readonly jkt: string;
}

/** A new ES256 DPoP key. */
export async function dpopKey(): Promise<DpopKey> {
  const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { privateKey, publicKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

/** RFC 9449 §4.2 `ath`: the base64url SHA-256 of the access token, computed here on its own. */
export function tokenHash(token: string): string {
  return createHash("sha256").update(token, "ascii").digest("base64url");
}

/** What a proof is made for. */
export interface ProofFor {
  readonly htm: string;
  readonly htu: string;
  /** Seconds since the epoch. */
  readonly iat: number;
  /** The access token it comes with, whose hash is its `ath`; none leaves `ath` out. */
  readonly token?: string;
  readonly nonce?: string;
  /** Claims replacing the ones above; an undefined one is left out. */
  readonly claims?: Record<string, unknown>;
  /** Header members replacing typ dpop+jwt, alg ES256 and the key's public jwk. */
  readonly header?: Record<string, unknown>;
}

/** A proof signed with `key` (or `signWith`, for a proof whose jwk is not its signer). */
export function proof(key: DpopKey, what: ProofFor, signWith?: CryptoKey | Uint8Array) {
  const payload: Record<string, unknown> = {
    jti: randomUUID(),
    htm: what.htm,
    htu: what.htu,
    iat: what.iat,
    ath: what.token === undefined ? undefined : tokenHash(what.token),
    nonce: what.nonce,
    ...what.claims,
  };
  for (const [name, value] of Object.entries(payload)) {
    if (value === undefined) delete payload[name];
  }
  return new SignJWT(payload)
    .setProtectedHeader({ typ: "dpop+jwt", alg: "ES256", jwk: key.jwk, ...what.header })
    .sign(signWith ?? key.privateKey);
}

/** Signs access tokens as the gatehouse whose EdDSA key is `pem` does. */
export async function ownSigner(pem: string, kid: string) {
  const key = await importPKCS8(pem, "EdDSA");
  return (claims: Record<string, unknown>): Promise<string> =>
    new SignJWT(claims).setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid }).sign(key);
}

/**
 * A new EdDSA signing key for a gatehouse: its PEM (for `key_file`) and a signer of the access
 * tokens that gatehouse issues, their `kid` its thumbprint.
 */
export async function ownSigningKey() {
  const pem = await generateKeyPem("EdDSA");
  const kid = await calculateJwkThumbprint(await exportJWK(createPublicKey(pem)));
  return { pem, sign: await ownSigner(pem, kid) };
}

/**
 * A client_credentials token request of `client` (its secret in the body) to the gatehouse at
 * `url` with the DPoP header `dpop`, and `headers`.
 */
export function dpopTokenRequest(
  url: string,
  client: TestClient,
  dpop: string,
  headers: Record<string, string> = {},
): Promise<ClientResponse> {
  return send(`${url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", dpop, ...headers },
    body: form([
      ["grant_type", "client_credentials"],
      ["client_id", client.id],
      ["client_secret", client.secret],
    ]),
  });
}

/** The headers of a DPoP-scheme request: the token and, unless undefined, its proof. */
export function dpopHeaders(token: string, dpop: string | undefined): Record<string, string> {
  return dpop === undefined
    ? { authorization: `DPoP ${token}` }
    : { authorization: `DPoP ${token}`, dpop };
}

/** A refusal as observed: status, challenge, body code and message, the access line's reason. */
export interface Observed {
  readonly status: number;
  readonly challenge: string | undefined;
  readonly error: unknown;
  readonly message: unknown;
  readonly reason: unknown;
}

/** What `response` looks like, its access log line included. */
export async function observed(g: TestGatehouse, response: ClientResponse): Promise<Observed> {
  const body = JSON.parse(response.body.toString("utf8")) as Record<string, unknown>;
  const id = String(response.headers["x-request-id"]);
  const line = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
  return {
    status: response.status,
    challenge: response.headers["www-authenticate"],
    error: body.error,
    message: body.message,
    reason: line.reason,
  };
}

/** Sends a GET (or `method`) with `headers` to `path` and observes its refusal. */
export async function refusal(
  g: TestGatehouse,
  path: string,
  headers: Record<string, string>,
  method = "GET",
): Promise<Observed> {
  return observed(g, await send(`${g.url}${path}`, { method, headers }));
}

/** Where a refusal's error goes: a route taking plain tokens too, or one requiring DPoP. */
export type RouteKind = "optional" | "required";

/**
 * The challenges of a refusal with `params` in the challenge of the scheme the request used
 * (`dpop`), on a route of `kind`; `tail` is the resource_metadata parameter, if any.
 */
export function challenge(kind: RouteKind, dpop: boolean, params: string, tail = ""): string {
  if (kind === "required") return `DPoP ${params}, ${ALGS}${tail}`;
  return dpop
    ? `Bearer realm="gatehouse"${tail}, DPoP ${params}, ${ALGS}`
    : `Bearer realm="gatehouse", ${params}${tail}, ${DPOP_CHALLENGE}`;
}

/**
 * The 401 `code` refusal of `rule` in `words` to a request that used the DPoP scheme (unless
 * `dpop` is false); `tail` as for `challenge`.
 */
export function refusedAs(
  kind: RouteKind,
  code: "invalid_token" | "invalid_dpop_proof" | "use_dpop_nonce",
  rule: string,
  words: string,
  dpop = true,
  tail = "",
): Observed {
  return {
    status: 401,
    challenge: challenge(kind, dpop, `error="${code}", error_description="${words}"`, tail),
    error: code,
    message: words,
    reason: `bearer_${rule}`,
  };
}
