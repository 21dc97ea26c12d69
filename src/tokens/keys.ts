/**
 * Signing and verification keys: imported from PEM or an HS256 secret, or generated. Every key's
 * `kid` is its RFC 7638 JWK thumbprint, so it can be computed from a public key alone.
 */
import { randomBytes } from "node:crypto";
import {
  calculateJwkThumbprint,
  exportJWK,
  exportPKCS8,
  generateKeyPair,
  importJWK,
  importPKCS8,
  importSPKI,
  type CryptoKey,
  type JWK,
} from "jose";
import { memoized } from "./memo.js";

/** The algorithms a deployment may sign with; verification is pinned to the one configured. */
export type SigningAlgorithm = "EdDSA" | "ES256" | "HS256";

/** Key material jose signs or verifies with. */
export type KeyMaterial = CryptoKey | Uint8Array;

/** A key that verifies tokens; `jwk` is its public half, absent for HS256 (never published). */
export interface VerificationKey {
  readonly kid: string;
  readonly key: KeyMaterial;
  readonly jwk: JWK | undefined;
}

/** The key tokens are signed with, and the key that verifies them. */
export interface KeyPair {
  readonly alg: SigningAlgorithm;
  readonly kid: string;
  readonly signingKey: KeyMaterial;
  readonly verification: VerificationKey;
}

/** Every key of one configuration: the signing pair and the keys still accepted, by `kid`. */
export interface KeyRing {
  readonly alg: SigningAlgorithm;
  readonly current: KeyPair;
  /** Verification keys by exact `kid` (RFC 8725 §3.10: no other way to pick a key). */
  readonly byKid: ReadonlyMap<string, KeyMaterial>;
  /** The JWKS document (RFC 7517 §5), serialised once. */
  readonly jwks: string;
}

/** Keys generated once per process for configurations without a key, reused across reloads. */
export interface EphemeralKeys {
  get(alg: SigningAlgorithm): Promise<KeyPair>;
}

/** HS256 secrets shorter than this are refused (RFC 7518 §3.2: a key of at least the hash size). */
export const MIN_HS256_BYTES = 32;

const PUBLIC_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  OKP: ["kty", "crv", "x"],
  EC: ["kty", "crv", "x", "y"],
};

async function publicJwk(key: CryptoKey): Promise<JWK> {
  const full = await exportJWK(key);
  const jwk: JWK = {};
  for (const member of PUBLIC_MEMBERS[full.kty ?? ""] ?? []) {
    (jwk as Record<string, unknown>)[member] = (full as Record<string, unknown>)[member];
  }
  return jwk;
}

async function verificationFromJwk(jwk: JWK, alg: "EdDSA" | "ES256"): Promise<VerificationKey> {
  const kid = await calculateJwkThumbprint(jwk, "sha256");
  const key = (await importJWK(jwk, alg)) as CryptoKey;
  return { kid, key, jwk: { ...jwk, kid, alg, use: "sig" } };
}

async function pairFromPrivate(privateKey: CryptoKey, alg: "EdDSA" | "ES256"): Promise<KeyPair> {
  const verification = await verificationFromJwk(await publicJwk(privateKey), alg);
  return { alg, kid: verification.kid, signingKey: privateKey, verification };
}

/** Imports a PKCS#8 PEM private key for `alg`; throws when it is not one. */
export async function keyPairFromPem(pem: string, alg: "EdDSA" | "ES256"): Promise<KeyPair> {
  return pairFromPrivate(await importPKCS8(pem, alg, { extractable: true }), alg);
}

/**
 * Imports a key accepted for verification only (`previous_keys`): an SPKI public key, or a
 * retired PKCS#8 private key of which only the public half is kept.
 */
export async function verificationKeyFromPem(
  pem: string,
  alg: "EdDSA" | "ES256",
): Promise<VerificationKey> {
  if (pem.includes("PRIVATE KEY-----")) return (await keyPairFromPem(pem, alg)).verification;
  const key = await importSPKI(pem, alg, { extractable: true });
  return verificationFromJwk(await publicJwk(key), alg);
}

/** An HS256 pair from a shared secret; its `kid` is the thumbprint of the `oct` JWK. */
export async function keyPairFromSecret(secret: Uint8Array): Promise<KeyPair> {
  const kid = await calculateJwkThumbprint(
    { kty: "oct", k: Buffer.from(secret).toString("base64url") },
    "sha256",
  );
  return {
    alg: "HS256",
    kid,
    signingKey: secret,
    verification: { kid, key: secret, jwk: undefined },
  };
}

/** Generates a new pair for `alg`. */
export async function generateKeyPairFor(alg: SigningAlgorithm): Promise<KeyPair> {
  if (alg === "HS256") return keyPairFromSecret(new Uint8Array(randomBytes(MIN_HS256_BYTES)));
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return pairFromPrivate(privateKey, alg);
}

/** A new PKCS#8 PEM private key for `alg` (`gatehouse keygen`). */
export async function generateKeyPem(alg: "EdDSA" | "ES256"): Promise<string> {
  return (await generateKeyWithJwks(alg)).pem;
}

/**
 * A new PKCS#8 PEM private key for `alg` and the JWKS of its public half, with `kid` (the RFC
 * 7638 thumbprint), `alg` and `use: sig`: a private_key_jwt client's pair (`keygen --jwks`).
 */
export async function generateKeyWithJwks(
  alg: "EdDSA" | "ES256",
): Promise<{ readonly pem: string; readonly jwks: string }> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const { verification } = await pairFromPrivate(privateKey, alg);
  return {
    pem: `${(await exportPKCS8(privateKey)).trimEnd()}\n`,
    jwks: `${JSON.stringify({ keys: [verification.jwk] }, null, 2)}\n`,
  };
}

/** Creates the per-process store of generated keys: one per algorithm, made on first use. */
export function createEphemeralKeys(): EphemeralKeys {
  return { get: memoized(generateKeyPairFor) };
}

/** Puts the current pair and the previous keys together; the current key wins a `kid` clash. */
export function keyRing(current: KeyPair, previous: readonly VerificationKey[]): KeyRing {
  const byKid = new Map<string, KeyMaterial>();
  const published: JWK[] = [];
  for (const key of [current.verification, ...previous]) {
    if (byKid.has(key.kid)) continue;
    byKid.set(key.kid, key.key);
    if (key.jwk !== undefined) published.push(key.jwk);
  }
  return { alg: current.alg, current, byKid, jwks: JSON.stringify({ keys: published }) };
}
