/**
 * DPoP proofs (RFC 9449 §4.2) as a client makes them, one per request: an ES256 key, and a JWT
 * signed by hand with node:crypto, its header (typ, alg, the public jwk) encoded once per key and
 * only the claims encoded per proof. The load generator makes one for every request it sends, so
 * the signing costs it, never the proxy.
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  type JsonWebKey,
  type KeyObject,
} from "node:crypto";

/** The algorithm the bench's clients sign their proofs with: RFC 9449's examples use it. */
export const PROOF_ALGORITHM = "ES256";

/** A new P-256 private key, as PKCS#8 PEM so that another process can read it. */
export function newProofKey(): string {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return privateKey.export({ type: "pkcs8", format: "pem" }) as string;
}

/** RFC 9449 §4.2 `ath`: the base64url SHA-256 of the access token. */
export function accessTokenHash(token: string): string {
  return createHash("sha256").update(token).digest("base64url");
}

/** An `htu`: the URL without its query and fragment (RFC 9449 §4.2). */
export function htuOf(url: string): string {
  const parsed = new URL(url);
  return parsed.origin + parsed.pathname;
}

/** Makes proofs with one key. */
export interface Prover {
  /** The public key that every proof's header carries. */
  readonly jwk: JsonWebKey;
  /**
   * A new proof for a `htm` request to `htu`; with `ath` (accessTokenHash of the token it is sent
   * with) for a protected resource, without it for the token endpoint.
   */
  proof(htm: string, htu: string, ath?: string): string;
}

// Unique across the processes that sign with one key: a random prefix per prover, then a count.
function jtiSource(): () => string {
  const prefix = randomBytes(12).toString("base64url");
  let count = 0;
  return () => prefix + (count++).toString(36);
}

/** A prover for the private key in `pem` (PKCS#8), as newProofKey makes. */
export function createProver(pem: string): Prover {
  const privateKey: KeyObject = createPrivateKey(pem);
  const { kty, crv, x, y } = createPublicKey(privateKey).export({ format: "jwk" });
  const jwk = { kty, crv, x, y };
  const header = JSON.stringify({ typ: "dpop+jwt", alg: PROOF_ALGORITHM, jwk });
  const headerPart = `${Buffer.from(header).toString("base64url")}.`;
  const nextJti = jtiSource();
  // RFC 7518 §3.4: ES256 signs with the two 32-byte integers side by side, not DER.
  const signingKey = { key: privateKey, dsaEncoding: "ieee-p1363" } as const;
  return {
    jwk,
    proof(htm, htu, ath) {
      const claims = {
        jti: nextJti(),
        htm,
        htu,
        iat: Math.floor(Date.now() / 1000),
        ...(ath === undefined ? {} : { ath }),
      };
      const input = headerPart + Buffer.from(JSON.stringify(claims)).toString("base64url");
      return `${input}.${sign("sha256", Buffer.from(input), signingKey).toString("base64url")}`;
    },
  };
}

/** One key of a client and the access token bound to it. */
export interface BoundKey {
  /** PKCS#8 PEM. */
  readonly key: string;
  readonly token: string;
}

/**
 * The two headers of a GET of `url` with a DPoP-bound token, new for each call: a fresh proof,
 * with each call the next of the keys, so that no key signs more than its share of the proofs.
 */
export function dpopHeaders(bound: readonly BoundKey[], url: string): () => Record<string, string> {
  const htu = htuOf(url);
  const clients = bound.map(({ key, token }) => ({
    prover: createProver(key),
    authorization: `DPoP ${token}`,
    ath: accessTokenHash(token),
  }));
  let next = 0;
  return () => {
    const client = clients[next++ % clients.length] as (typeof clients)[number];
    return {
      authorization: client.authorization,
      dpop: client.prover.proof("GET", htu, client.ath),
    };
  };
}
