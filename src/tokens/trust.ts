/**
 * What a verified token and a secret remembered as correct stand on, as one digest: the keys
 * (each by its RFC 7638 thumbprint, which is its `kid`, so a key file with a new key under the
 * same name is a change), the own issuer and the claims it checks, the trusted issuers, and the
 * clients with their secrets and JWKS files. Two configurations with the same digest verify every
 * token to the same facts and match every secret alike, so what one learnt holds for the other.
 */
import { createHash } from "node:crypto";
import type { FileConfig } from "../config/schema.js";
import type { KeyRing } from "./keys.js";
import type { SecretRecord } from "./secrets.js";

// `tokens` keys that nothing verified or remembered stands on: how failures are limited and
// checks bounded, where the endpoints are, which scopes exist (a token carries its own), and how
// DPoP proofs and client assertions are checked (neither is remembered). Every other key, one
// added later too, is part of the digest: a key wrongly in it only empties the caches.
const UNRELATED_TOKEN_KEYS = new Set([
  "failure_limit",
  "verify_concurrency",
  "path",
  "revocation_path",
  "scopes",
  "dpop",
  "assertion_max_lifetime",
]);

// A client's limits: read from the configuration in force by every request, never cached.
const UNRELATED_CLIENT_KEYS = new Set(["plan", "rate_limit", "rate_limits", "quota"]);

function without(entry: object, keys: ReadonlySet<string>): Array<[string, unknown]> {
  return Object.entries(entry).filter(([key]) => !keys.has(key));
}

/** What the trust digest is made of, compiled. */
export interface TrustParts {
  readonly file: FileConfig;
  readonly keys: KeyRing;
  /** The own clients' secrets, by client id. */
  readonly secrets: ReadonlyMap<string, SecretRecord>;
  /** The digests of the clients' JWKS files, as read. */
  readonly jwksFiles: readonly string[];
}

/** The digest of what verified tokens and remembered secrets stand on, hex; kept in memory only. */
export function trustOf({ file, keys, secrets, jwksFiles }: TrustParts): string {
  const hash = createHash("sha256");
  const part = (value: unknown): void => void hash.update(`${JSON.stringify(value)}\n`);
  part(without(file.tokens, UNRELATED_TOKEN_KEYS));
  part([keys.alg, keys.current.kid, ...keys.byKid.keys()]);
  part(file.clients.map((client) => without(client, UNRELATED_CLIENT_KEYS)));
  // A secret from the environment is in no file: its derived key stands for it.
  for (const [id, { params, salt, key }] of secrets) {
    part([id, params, salt.toString("hex"), key.toString("hex")]);
  }
  part(jwksFiles);
  return hash.digest("hex");
}
