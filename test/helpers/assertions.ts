/** private_key_jwt helpers: client key pairs, their JWKS, assertions signed with jose. */
import { randomUUID } from "node:crypto";
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from "jose";
import { send } from "./client.js";
import { basic, form, type TokenAnswer } from "./tokens.js";

/** The client_assertion_type of a JWT assertion (RFC 7523 §2.2). */
export const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** A private_key_jwt client as a test knows it. */
export interface KeyClient {
  readonly id: string;
  readonly alg: "ES256" | "EdDSA";
  readonly privateKey: CryptoKey;
  /** The public key as published in the client's JWKS file. */
  readonly jwk: JWK;
  /** The JWKS file's content. */
  readonly jwks: string;
}

/** A new client key pair for `alg`, with its JWKS (kid = RFC 7638 thumbprint). */
export async function keyClient(id: string, alg: "ES256" | "EdDSA"): Promise<KeyClient> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  const published = { ...jwk, kid, use: "sig" };
  return { id, alg, privateKey, jwk: published, jwks: JSON.stringify({ keys: [published] }) };
}

/** YAML entries for `clients`, each naming `<id>.jwks.json` (see `jwksFiles`). */
export function keyClientsYaml(clients: readonly KeyClient[]): string {
  return clients.map((c) => `  - id: ${c.id}\n    jwks_file: ./${c.id}.jwks.json\n`).join("");
}

/** The JWKS files of `clients`, for startTestGatehouse's `files`. */
export function jwksFiles(clients: readonly KeyClient[]): Record<string, string> {
  return Object.fromEntries(clients.map((c) => [`${c.id}.jwks.json`, c.jwks]));
}

/** What an assertion says; each claim may be replaced or removed (undefined). */
export interface AssertionClaims extends JWTPayload {
  readonly [claim: string]: unknown;
}

/**
 * A client assertion by `client` at `nowMs` for the issuer `aud`: iss = sub = the client id, a
 * fresh jti, exp a minute ahead; `claims` replace any of these, `header` adds to the header.
 */
export async function assertion(
  client: KeyClient,
  nowMs: number,
  aud: string,
  claims: AssertionClaims = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const now = Math.floor(nowMs / 1000);
  const payload: Record<string, unknown> = {
    iss: client.id,
    sub: client.id,
    aud,
    jti: randomUUID(),
    iat: now,
    exp: now + 60,
    ...claims,
  };
  for (const [name, value] of Object.entries(payload)) {
    if (value === undefined) delete payload[name];
  }
  return new SignJWT(payload)
    .setProtectedHeader({ alg: client.alg, kid: client.jwk.kid, ...header })
    .sign(client.privateKey);
}

/** POSTs a form to `path`; the body is parsed when it is JSON. */
export async function postForm(
  url: string,
  path: string,
  pairs: ReadonlyArray<[string, string]>,
  headers: Record<string, string> = {},
): Promise<TokenAnswer> {
  const response = await send(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: form(pairs),
  });
  const text = response.body.toString("utf8");
  const json = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
  return { ...response, json };
}

/** A token request authenticated by `signed` (a client assertion). */
export function assertionRequest(
  url: string,
  signed: string,
  more: ReadonlyArray<[string, string]> = [],
): Promise<TokenAnswer> {
  return postForm(url, "/oauth/token", [
    ["grant_type", "client_credentials"],
    ["client_assertion_type", JWT_BEARER],
    ["client_assertion", signed],
    ...more,
  ]);
}

/** A revocation of `token` (RFC 7009) by a client with a secret, over Basic. */
export function revokeWithSecret(
  url: string,
  client: { id: string; secret: string },
  token: string,
): Promise<TokenAnswer> {
  return postForm(url, "/oauth/revoke", [["token", token]], {
    authorization: basic(client.id, client.secret),
  });
}
