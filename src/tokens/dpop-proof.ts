/**
 * DPoP proofs (RFC 9449 §4.3): a JWT the client signs, for each request, with the key its token
 * is bound to. Checked here against the request it came with; whether its `jti` was seen before
 * is the caller's question (marks.ts), asked last, so that only a proof that passed everything
 * else is held.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { fieldLines } from "../http/field-lines.js";
import {
  calculateJwkThumbprint,
  EmbeddedJWK,
  errors,
  jwtVerify,
  type FlattenedJWSInput,
  type JWTHeaderParameters,
  type JWTPayload,
} from "jose";
import type { DpopNonces } from "./dpop-nonce.js";
import type { KeyMaterial } from "./keys.js";

/** Every rule a proof can break, and what its refusal says. */
export const PROOF_RULES = {
  header: "the request must carry exactly one DPoP header",
  too_large: "the DPoP header must be at most 8192 bytes",
  malformed: "the DPoP proof is not a signed JWT",
  typ: "the DPoP proof's typ must be dpop+jwt",
  algorithm: "the DPoP proof's alg is not one accepted here",
  jwk: "the DPoP proof's jwk must be a public key for its alg",
  rsa_key:
    "the DPoP proof's RSA key must have a modulus of 2048 to 4096 bits and the public exponent 65537",
  signature: "the DPoP proof's signature does not verify with its jwk",
  claims: "the DPoP proof needs a jti, htm, htu and iat",
  htm: "the DPoP proof's htm is not this request's method",
  htu: "the DPoP proof's htu is not this request's URL",
  iat: "the DPoP proof's iat is outside the accepted window",
  ath: "the DPoP proof's ath is not the hash of this access token",
  key: "the DPoP proof's key is not the one the token is bound to",
  full: "the DPoP proof's client has used too many proofs within the accepted window (at most 100000); send more once its older ones have left the window",
  replay: "the DPoP proof has been used before",
  nonce: "the DPoP proof needs the nonce given in DPoP-Nonce",
} as const;

/** A rule a proof can break. */
export type ProofRule = keyof typeof PROOF_RULES;

/**
 * Why a proof was refused: `reason` names the rule (its words are in PROOF_RULES); the message
 * says more for a debugging reader and never reaches the client.
 */
export class ProofRejected extends Error {
  constructor(
    readonly reason: ProofRule,
    message: string = PROOF_RULES[reason],
  ) {
    super(message);
    this.name = "ProofRejected";
  }
}

/** What proofs are checked against, for one configuration. */
export interface ProofSettings {
  /** `tokens.dpop.algorithms`. */
  readonly algorithms: readonly string[];
  /** How far a proof's `iat` may lie from now, behind or ahead: all the leeway it has. */
  readonly iatWindowSeconds: number;
  /** The leeway for an `exp` or `nbf` a proof chooses to carry; never added to the window. */
  readonly clockToleranceSeconds: number;
  /** Nonces, when `tokens.dpop.nonce` requires them. */
  readonly nonces: DpopNonces | undefined;
}

/** What one request's proof must match. */
export interface ProofCheck {
  /** The request's method (`htm`). */
  readonly method: string;
  /** The URL the client used, as `normalizedHtu` gives it (`htu`). */
  readonly url: string;
  /** A WebSocket handshake: its `htu` may name the URL in `ws` or `wss` for `http` or `https`. */
  readonly webSocket?: boolean;
  /** The access token the proof comes with, whose hash is its `ath`; none at the token endpoint. */
  readonly accessToken?: string;
  /** The thumbprint the token is bound to (`cnf.jkt`); none at the token endpoint. */
  readonly jkt?: string;
}

/**
 * A proof that passed: its key's thumbprint, its `jti`, and the first millisecond (epoch ms) at
 * which it no longer verifies: its `jti` is held until then.
 */
export interface CheckedProof {
  readonly jkt: string;
  readonly jti: string;
  readonly untilMs: number;
}

/** Checks proofs for one configuration, remembering the keys of proofs that verified. */
export interface ProofVerifier {
  /** Checks `proof` against `check` at `nowMs`; rejects with ProofRejected. */
  verify(proof: string, check: ProofCheck, nowMs: number): Promise<CheckedProof>;
  /** What the cache of proof keys holds now. */
  footprint(): { readonly entries: number; readonly bytes: number };
}

/** A `jti` longer than this is refused: it is held, per client, until the proof's window ends. */
export const MAX_PROOF_JTI_LENGTH = 256;

/** A `DPoP` header longer than this is refused before its proof is read. */
export const MAX_PROOF_BYTES = 8 * 1024;

/** How many proof keys are remembered, at most; the least recently used is forgotten first. */
export const PROOF_KEY_CACHE_SIZE = 10_000;

/** How many bytes the remembered proof keys may take, at most, as `keyBytes` counts them. */
export const PROOF_KEY_CACHE_BYTES = 8 * 1024 * 1024;

// What a remembered key costs beyond its public numbers: the Map entry, the two 43-character
// digests, the CryptoKey object and its native handle.
const KEY_ENTRY_OVERHEAD = 512;

// What a remembered key costs: its public numbers, which is all the imported key keeps of its
// jwk (other members, however long, are not kept), and the entry around them.
function keyBytes(jwk: Record<string, unknown>): number {
  let bytes = KEY_ENTRY_OVERHEAD;
  for (const member of ["n", "e", "x", "y"]) {
    const value = jwk[member];
    if (typeof value === "string") bytes += value.length;
  }
  return bytes;
}

/** Whether the request's `DPoP` field (its lines joined) is longer than MAX_PROOF_BYTES. */
export function proofTooLarge(req: IncomingMessage): boolean {
  const value = req.headers.dpop;
  return value !== undefined && value.length > MAX_PROOF_BYTES;
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

// RFC 6455 §3: a WebSocket's URL is its handshake's, with `ws` for `http` and `wss` for `https`
// (the default ports are the same). A browser or a WebSocket client names the URL it opened.
const WEBSOCKET_SCHEMES: ReadonlyMap<string, string> = new Map([
  ["ws:", "http:"],
  ["wss:", "https:"],
]);

/**
 * An `htu` or a request's URL in the form they are compared in (RFC 9449 §4.3 item 9, RFC 3986
 * §6.2.2 and §6.2.3): scheme and host in lower case, no default port, dot segments resolved,
 * percent-encodings in upper case and unreserved characters decoded, without query and fragment.
 * With `webSocket`, a `ws` or `wss` URL is taken as its `http` or `https` one. Undefined when it
 * is no http or https URL.
 */
export function normalizedHtu(value: string, webSocket = false): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  const httpScheme = webSocket ? WEBSOCKET_SCHEMES.get(url.protocol) : undefined;
  if (httpScheme !== undefined) url.protocol = httpScheme;
  if (url.protocol !== "https:" && url.protocol !== "http:") return undefined;
  const path = url.pathname.replace(/%([0-9A-Fa-f]{2})/g, (escape, hex: string) => {
    const char = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(char) ? char : escape.toUpperCase();
  });
  return url.origin + path;
}

/** RFC 9449 §4.2 `ath`: the base64url SHA-256 of the access token. */
export function accessTokenHash(token: string): string {
  return createHash("sha256").update(token).digest("base64url");
}

// RFC 7515 §7.1: three base64url parts.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

// The refusal for an error jose raised while verifying a proof.
function proofRejectionOf(error: unknown): ProofRejected {
  if (error instanceof ProofRejected) return error;
  const message = (error as Error).message;
  if (error instanceof errors.JOSEAlgNotAllowed) return new ProofRejected("algorithm", message);
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return new ProofRejected("signature", message);
  }
  if (error instanceof errors.JWTClaimValidationFailed && error.claim === "typ") {
    return new ProofRejected("typ", message);
  }
  // jose checks a present `iat` is a number before any claim of ours is read: one that is not
  // is a malformed claim, not a time outside the window.
  if (
    error instanceof errors.JWTClaimValidationFailed &&
    error.claim === "iat" &&
    error.reason === "invalid"
  ) {
    return new ProofRejected("claims", message);
  }
  // An `exp` or `nbf` the proof chose to carry, and found wanting.
  if (error instanceof errors.JWTExpired || error instanceof errors.JWTClaimValidationFailed) {
    return new ProofRejected("iat", message);
  }
  return new ProofRejected("malformed", message);
}

interface ProofKey {
  readonly key: KeyMaterial;
  readonly jkt: string;
  readonly bytes: number;
}

// The claims every proof carries (RFC 9449 §4.2), each of the type it must have.
function claimsOf(payload: JWTPayload): { jti: string; htm: string; htu: string; iat: number } {
  const { jti, htm, htu, iat } = payload;
  if (
    typeof jti !== "string" ||
    jti === "" ||
    jti.length > MAX_PROOF_JTI_LENGTH ||
    typeof htm !== "string" ||
    typeof htu !== "string" ||
    typeof iat !== "number" ||
    !Number.isFinite(iat)
  ) {
    throw new ProofRejected("claims");
  }
  return { jti, htm, htu, iat };
}

// RFC 7518 §6.3.1: the public exponent 65537, and the modulus's length in bits.
const RSA_EXPONENT = "AQAB";
const RSA_MIN_BITS = 2048;
const RSA_MAX_BITS = 4096;

function modulusBits(n: string): number {
  const bytes = Buffer.from(n, "base64url");
  let first = 0;
  while (first < bytes.length && bytes[first] === 0) first++;
  if (first === bytes.length) return 0;
  return (bytes.length - first - 1) * 8 + (32 - Math.clz32(bytes[first] as number));
}

// An RSA key's cost to verify grows with its exponent and modulus, both the sender's choice: one
// outside what RSA signers use is refused before it is imported or verified with.
function checkRsaKey(jwk: Record<string, unknown>): void {
  if (jwk.kty !== "RSA") return;
  const { n, e } = jwk;
  // Beyond 4096 bits' 683 characters there is nothing to decode.
  if (e !== RSA_EXPONENT || typeof n !== "string" || n.length > 700) {
    throw new ProofRejected("rsa_key");
  }
  const bits = modulusBits(n);
  if (bits < RSA_MIN_BITS || bits > RSA_MAX_BITS) throw new ProofRejected("rsa_key");
}

// What importing a proof's key depends on, and nothing else: its alg and its jwk, as parsed. A
// client's proofs share them, so its key is imported and its thumbprint computed once; junk
// elsewhere in the header changes nothing, and the digest is all the cache keeps of the header.
function keyDigest(alg: string, jwkText: string): string {
  return createHash("sha256").update(alg).update("\n").update(jwkText).digest("base64url");
}

/** The proof keys remembered, bounded in entries and in bytes; the least recently used goes first. */
function createKeyCache(maxEntries: number, maxBytes: number) {
  const keys = new Map<string, ProofKey>();
  let bytes = 0;
  return {
    get(digest: string): ProofKey | undefined {
      const entry = keys.get(digest);
      if (entry !== undefined) {
        keys.delete(digest);
        keys.set(digest, entry);
      }
      return entry;
    },
    set(digest: string, entry: ProofKey): void {
      if (keys.has(digest)) return;
      keys.set(digest, entry);
      bytes += entry.bytes;
      for (const [oldest, held] of keys) {
        if (keys.size <= maxEntries && bytes <= maxBytes) break;
        keys.delete(oldest);
        bytes -= held.bytes;
      }
    },
    footprint: () => ({ entries: keys.size, bytes }),
  };
}

/** Creates a verifier for `settings`, with its own cache of proof keys. */
export function createProofVerifier(
  settings: ProofSettings,
  cacheSize = PROOF_KEY_CACHE_SIZE,
  cacheBytes = PROOF_KEY_CACHE_BYTES,
): ProofVerifier {
  const { nonces } = settings;
  const algorithms = [...settings.algorithms];
  // In whole milliseconds, as the proof's iat is compared and its jti held.
  const windowMs = Math.round(settings.iatWindowSeconds * 1000);
  const keys = createKeyCache(cacheSize, cacheBytes);

  const importKey = async (
    header: JWTHeaderParameters,
    token: FlattenedJWSInput,
  ): Promise<ProofKey> => {
    const jwk = header.jwk as Record<string, unknown> | undefined;
    if (typeof jwk === "object" && jwk !== null) checkRsaKey(jwk);
    let key;
    try {
      key = await EmbeddedJWK(header, token);
    } catch (error) {
      throw new ProofRejected("jwk", (error as Error).message);
    }
    const verified = jwk as Record<string, unknown>;
    return { key, jkt: await calculateJwkThumbprint(verified), bytes: keyBytes(verified) };
  };

  return {
    async verify(proof, check, nowMs) {
      if (!COMPACT_JWS.test(proof)) throw new ProofRejected("malformed");
      let entry: ProofKey | undefined;
      let digest = "";
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(
          proof,
          async (header, token) => {
            digest = keyDigest(header.alg, JSON.stringify(header.jwk) ?? "");
            entry = keys.get(digest) ?? (await importKey(header, token));
            return entry.key;
          },
          {
            algorithms,
            typ: "dpop+jwt",
            currentDate: new Date(nowMs),
            // Only for an exp or nbf the proof carries: its iat is compared below.
            clockTolerance: settings.clockToleranceSeconds,
          },
        ));
      } catch (error) {
        throw proofRejectionOf(error);
      }
      const proofKey = entry as ProofKey;
      // Only a key whose proof verified is kept: junk headers cannot push the clients' keys out.
      keys.set(digest, proofKey);
      const { jti, htm, htu, iat } = claimsOf(payload);
      // A fraction of a second in iat is kept to the millisecond, so the window and the time
      // its jti is held are whole milliseconds, as every store takes them.
      const iatMs = Math.floor(iat * 1000);
      // The window is all the leeway, either way: the clock tolerance does not widen it.
      const lastMs = iatMs + windowMs;
      if (iatMs > nowMs + windowMs || nowMs > lastMs) throw new ProofRejected("iat");
      if (htm !== check.method) throw new ProofRejected("htm");
      if (normalizedHtu(htu, check.webSocket) !== check.url) throw new ProofRejected("htu");
      if (check.accessToken !== undefined && payload.ath !== accessTokenHash(check.accessToken)) {
        throw new ProofRejected("ath");
      }
      if (check.jkt !== undefined && proofKey.jkt !== check.jkt) throw new ProofRejected("key");
      if (nonces !== undefined && !nonces.accepts(payload.nonce, nowMs)) {
        throw new ProofRejected("nonce");
      }
      // Held through lastMs, the last millisecond at which the proof verifies.
      return { jkt: proofKey.jkt, jti, untilMs: lastMs + 1 };
    },
    footprint: () => keys.footprint(),
  };
}

/** What checking a request's one proof came to: the proof, the rule it broke, or a store down. */
export type ProofUse = CheckedProof | ProofRule | "unavailable";

/**
 * Where a proof's `jti` is held once it passed, for the client it came from (its ids are bounded
 * per client, as one client can make any number of keys): "first" when it was not held before.
 */
export type FirstProof = (
  clientId: string,
  jkt: string,
  jti: string,
  untilMs: number,
  nowMs: number,
) => Promise<"first" | "replayed" | "full" | "unavailable">;

/**
 * Checks the one proof a request's `DPoP` field lines hold (RFC 9449 §4.3 item 1: exactly one;
 * Node would join several into one value, so the lines are counted as sent), then holds its
 * `jti` for `clientId` with `firstProof`: last, so that only a proof that passed everything else
 * is held. A field over MAX_PROOF_BYTES is refused by the caller before anything is verified.
 */
export async function useProof(
  verifier: ProofVerifier,
  firstProof: FirstProof,
  req: IncomingMessage,
  clientId: string,
  check: ProofCheck,
  nowMs: number,
): Promise<ProofUse> {
  if (fieldLines(req.rawHeaders, "dpop") !== 1) return "header";
  const proof = req.headers.dpop as string;
  let checked: CheckedProof;
  try {
    checked = await verifier.verify(proof, check, nowMs);
  } catch (error) {
    if (error instanceof ProofRejected) return error.reason;
    throw error;
  }
  const use = await firstProof(clientId, checked.jkt, checked.jti, checked.untilMs, nowMs);
  if (use === "first") return checked;
  if (use === "unavailable") return "unavailable";
  return use === "replayed" ? "replay" : "full";
}
