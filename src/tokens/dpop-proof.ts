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
  malformed: "the DPoP proof is not a signed JWT",
  typ: "the DPoP proof's typ must be dpop+jwt",
  algorithm: "the DPoP proof's alg is not one accepted here",
  jwk: "the DPoP proof's jwk must be a public key for its alg",
  signature: "the DPoP proof's signature does not verify with its jwk",
  claims: "the DPoP proof needs a jti, htm, htu and iat",
  htm: "the DPoP proof's htm is not this request's method",
  htu: "the DPoP proof's htu is not this request's URL",
  iat: "the DPoP proof's iat is outside the accepted window",
  ath: "the DPoP proof's ath is not the hash of this access token",
  key: "the DPoP proof's key is not the one the token is bound to",
  full: "the DPoP proof's key has signed too many proofs within the accepted window (at most 100000); use it again once older proofs have left the window",
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
  /** How far a proof's `iat` may lie behind now, beyond the clock tolerance. */
  readonly iatWindowSeconds: number;
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
  /** The access token the proof comes with, whose hash is its `ath`; none at the token endpoint. */
  readonly accessToken?: string;
  /** The thumbprint the token is bound to (`cnf.jkt`); none at the token endpoint. */
  readonly jkt?: string;
}

/** A proof that passed: its key's thumbprint, its `jti`, and until when it could verify (epoch ms). */
export interface CheckedProof {
  readonly jkt: string;
  readonly jti: string;
  readonly untilMs: number;
}

/** Checks proofs for one configuration, remembering the keys of proofs that verified. */
export interface ProofVerifier {
  /** Checks `proof` against `check` at `nowMs`; rejects with ProofRejected. */
  verify(proof: string, check: ProofCheck, nowMs: number): Promise<CheckedProof>;
}

/** A `jti` longer than this is refused: it is held, per key, until the proof's window ends. */
export const MAX_PROOF_JTI_LENGTH = 256;

/** How many proof keys are remembered; the oldest is forgotten first. */
export const PROOF_KEY_CACHE_SIZE = 10_000;

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * An `htu` or a request's URL in the form they are compared in (RFC 9449 §4.3 item 9, RFC 3986
 * §6.2.2 and §6.2.3): scheme and host in lower case, no default port, dot segments resolved,
 * percent-encodings in upper case and unreserved characters decoded, without query and fragment.
 * Undefined when it is no http or https URL.
 */
export function normalizedHtu(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
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

/** Creates a verifier for `settings`, with its own cache of proof keys. */
export function createProofVerifier(
  settings: ProofSettings,
  cacheSize = PROOF_KEY_CACHE_SIZE,
): ProofVerifier {
  const { iatWindowSeconds, clockToleranceSeconds: tolerance, nonces } = settings;
  const algorithms = [...settings.algorithms];
  // By the proof's protected header (its alg, typ and jwk, as sent): a client's proofs share one,
  // so a client's key is imported and its thumbprint computed once.
  const keys = new Map<string, ProofKey>();

  const importKey = async (
    header: JWTHeaderParameters,
    token: FlattenedJWSInput,
  ): Promise<ProofKey> => {
    let key;
    try {
      key = await EmbeddedJWK(header, token);
    } catch (error) {
      throw new ProofRejected("jwk", (error as Error).message);
    }
    const jkt = await calculateJwkThumbprint(header.jwk as NonNullable<typeof header.jwk>);
    return { key, jkt };
  };

  const remember = (segment: string, entry: ProofKey): void => {
    if (keys.size >= cacheSize) {
      const oldest = keys.keys().next();
      if (!oldest.done) keys.delete(oldest.value);
    }
    keys.set(segment, entry);
  };

  return {
    async verify(proof, check, nowMs) {
      if (!COMPACT_JWS.test(proof)) throw new ProofRejected("malformed");
      const segment = proof.slice(0, proof.indexOf("."));
      let entry = keys.get(segment);
      const known = entry !== undefined;
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(
          proof,
          async (header, token) => {
            entry ??= await importKey(header, token);
            return entry.key;
          },
          { algorithms, typ: "dpop+jwt", currentDate: new Date(nowMs), clockTolerance: tolerance },
        ));
      } catch (error) {
        throw proofRejectionOf(error);
      }
      const proofKey = entry as ProofKey;
      // Only a key whose proof verified is kept: junk headers cannot push the clients' keys out.
      if (!known) remember(segment, proofKey);
      const { jti, htm, htu, iat } = claimsOf(payload);
      const nowS = nowMs / 1000;
      if (iat > nowS + tolerance || iat < nowS - iatWindowSeconds - tolerance) {
        throw new ProofRejected("iat");
      }
      if (htm !== check.method) throw new ProofRejected("htm");
      if (normalizedHtu(htu) !== check.url) throw new ProofRejected("htu");
      if (check.accessToken !== undefined && payload.ath !== accessTokenHash(check.accessToken)) {
        throw new ProofRejected("ath");
      }
      if (check.jkt !== undefined && proofKey.jkt !== check.jkt) throw new ProofRejected("key");
      if (nonces !== undefined && !nonces.accepts(payload.nonce, nowMs)) {
        throw new ProofRejected("nonce");
      }
      return {
        jkt: proofKey.jkt,
        jti,
        untilMs: (iat + iatWindowSeconds + tolerance) * 1000,
      };
    },
  };
}

/** What checking a request's one proof came to: the proof, the rule it broke, or a store down. */
export type ProofUse = CheckedProof | ProofRule | "unavailable";

/** Where a proof's `jti` is held once it passed: "first" when it was not held before. */
export type FirstProof = (
  jkt: string,
  jti: string,
  untilMs: number,
  nowMs: number,
) => Promise<"first" | "replayed" | "full" | "unavailable">;

/**
 * Checks the one proof a request's `DPoP` field lines hold (RFC 9449 §4.3 item 1: exactly one;
 * Node would join several into one value, so the lines are counted as sent), then holds its
 * `jti` with `firstProof`: last, so that only a proof that passed everything else is held.
 */
export async function useProof(
  verifier: ProofVerifier,
  firstProof: FirstProof,
  req: IncomingMessage,
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
  const use = await firstProof(checked.jkt, checked.jti, checked.untilMs, nowMs);
  if (use === "first") return checked;
  if (use === "unavailable") return "unavailable";
  return use === "replayed" ? "replay" : "full";
}
