/**
 * A private_key_jwt client's public keys (RFC 7523 §2.2): a JWKS file read at load, each key
 * checked and its algorithm pinned by its type, so an assertion's `alg` can only be one the key
 * was made for (RFC 8725 §3.1: never `none`, never an HMAC keyed with public key bytes).
 */
import { createLocalJWKSet, importJWK, type JSONWebKeySet, type JWK } from "jose";

/** What verifies one client's assertions. */
export interface ClientKeys {
  /** jose's key selector over the client's keys (by `kid`, `alg` and key type). */
  readonly keySet: ReturnType<typeof createLocalJWKSet>;
  /** The algorithms its keys allow, the only ones an assertion may use. */
  readonly algorithms: readonly string[];
}

/** The smallest RSA modulus accepted (RFC 7518 §3.3: 2048 bits or larger). */
export const MIN_RSA_BITS = 2048;

// Members of a private key: a public JWKS never holds them.
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/** The algorithms a public JWK may verify, or why it is refused. */
function keyAlgorithms(jwk: JWK): readonly string[] | string {
  if (PRIVATE_MEMBERS.some((member) => member in jwk)) {
    return "holds private key material; the file must hold public keys only";
  }
  if (jwk.use !== undefined && jwk.use !== "sig") return `has use "${jwk.use}"; it must be "sig"`;
  let allowed: readonly string[];
  if (jwk.kty === "OKP" && jwk.crv === "Ed25519") allowed = ["EdDSA"];
  else if (jwk.kty === "EC" && jwk.crv === "P-256") allowed = ["ES256"];
  else if (jwk.kty === "RSA") {
    const bits = Buffer.from(jwk.n ?? "", "base64url").length * 8;
    if (bits < MIN_RSA_BITS) return `is a ${bits}-bit RSA key; at least ${MIN_RSA_BITS} bits`;
    allowed = ["RS256", "PS256"];
  } else {
    return "must be an Ed25519 (OKP), P-256 (EC) or RSA public key";
  }
  if (jwk.alg === undefined) return allowed;
  return allowed.includes(jwk.alg)
    ? [jwk.alg]
    : `has alg "${jwk.alg}", not ${allowed.join(" or ")}`;
}

/**
 * Reads a client's JWKS document; a string result says what is wrong with it. Every key is
 * imported once here, so a broken one is refused at load rather than at the first assertion.
 */
export async function parseClientKeys(text: string): Promise<ClientKeys | string> {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    return 'is not JSON; it must be a JWKS document ({"keys": [...]})';
  }
  const keys = (document as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) {
    return 'must be a JWKS document with at least one key ({"keys": [...]})';
  }
  const algorithms = new Set<string>();
  for (const [index, jwk] of (keys as JWK[]).entries()) {
    const allowed =
      jwk !== null && typeof jwk === "object" ? keyAlgorithms(jwk) : "must be a JSON object";
    if (typeof allowed === "string") return `keys[${index}] ${allowed}`;
    try {
      await importJWK(jwk, allowed[0]);
    } catch (error) {
      return `keys[${index}] is not a usable key (${(error as Error).message})`;
    }
    for (const alg of allowed) algorithms.add(alg);
  }
  return {
    keySet: createLocalJWKSet(document as JSONWebKeySet),
    algorithms: [...algorithms].sort(),
  };
}
