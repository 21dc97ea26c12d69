/**
 * Client secrets: the `secret_hash` format made by `gatehouse hash-secret`, and a comparison that
 * costs the same for an unknown client id as for a wrong secret (OWASP API2:2023).
 *
 * Format: `scrypt$ln=14,r=8,p=1$<salt>$<key>` (salt and key base64url, the key 32 bytes). The
 * default cost is Django's scrypt hasher's (N = 2^14, r = 8, p = 1): client secrets are long and
 * random, so the KDF guards a leaked file rather than weak passwords.
 */
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { memoized } from "./memo.js";

/** scrypt's cost parameters; `ln` is log2 of N. */
export interface ScryptParams {
  readonly ln: number;
  readonly r: number;
  readonly p: number;
}

/** A stored secret: what a presented secret is derived with, and the key it must produce. */
export interface SecretRecord {
  readonly params: ScryptParams;
  readonly salt: Buffer;
  readonly key: Buffer;
}

/** The cost `hash-secret` uses. */
export const DEFAULT_SCRYPT: ScryptParams = Object.freeze({ ln: 14, r: 8, p: 1 });

const KEY_BYTES = 32;
const SALT_BYTES = 16;
const FORMAT =
  /^scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]{16,})\$([A-Za-z0-9_-]+)$/;

function derive(secret: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const N = 2 ** params.ln;
  return new Promise((done, fail) => {
    scrypt(
      secret,
      salt,
      KEY_BYTES,
      // Node refuses work above maxmem (32 MiB by default); scrypt needs about 128 * N * r bytes.
      { N, r: params.r, p: params.p, maxmem: 256 * N * params.r + 1024 * 1024 },
      (error, key) => (error ? fail(error) : done(key)),
    );
  });
}

/** Hashes `secret` into the `secret_hash` format. */
export async function hashSecret(
  secret: string,
  params: ScryptParams = DEFAULT_SCRYPT,
): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(secret, salt, params);
  return formatRecord({ params, salt, key });
}

/** Writes a record in the `secret_hash` format. */
export function formatRecord(record: SecretRecord): string {
  const { ln, r, p } = record.params;
  const salt = record.salt.toString("base64url");
  return `scrypt$ln=${ln},r=${r},p=${p}$${salt}$${record.key.toString("base64url")}`;
}

/** Reads a `secret_hash` value; a string result says what is wrong with it. */
export function parseSecretHash(text: string): SecretRecord | string {
  const match = FORMAT.exec(text);
  if (match === null) {
    return 'is not a value printed by "gatehouse hash-secret" (scrypt$ln=..,r=..,p=..$salt$key)';
  }
  const [ln, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  // Bounds keep one verification from taking seconds or gigabytes.
  if (ln < 10 || ln > 20 || r < 1 || r > 16 || p < 1 || p > 4) {
    return "has scrypt parameters out of range (ln 10-20, r 1-16, p 1-4)";
  }
  const key = Buffer.from(match[5] as string, "base64url");
  if (key.length !== KEY_BYTES) return `must hold a ${KEY_BYTES}-byte key`;
  return { params: { ln, r, p }, salt: Buffer.from(match[4] as string, "base64url"), key };
}

/** A record for a secret held in plain text (from `secret_env`), so it is checked like the others. */
async function recordFromSecret(
  secret: string,
  params: ScryptParams = DEFAULT_SCRYPT,
): Promise<SecretRecord> {
  const salt = randomBytes(SALT_BYTES);
  return { params, salt, key: await derive(secret, salt, params) };
}

/** Records for secrets held in plain text, each derived once per process. */
export interface PlainSecrets {
  record(secret: string): Promise<SecretRecord>;
}

/**
 * Derives each distinct plain-text secret once per process. Every change in the config file's
 * folder reloads the config, and each reload would otherwise pay a full scrypt derivation (16 MiB
 * and tens of milliseconds) for every `secret_env` client. The secrets come from the environment,
 * which does not change while the process runs, so what is kept is bounded by it.
 */
export function createPlainSecrets(): PlainSecrets {
  return { record: memoized((secret: string) => recordFromSecret(secret)) };
}

/** A record no secret matches, checked for unknown client ids so they cost a real comparison. */
export function dummyRecord(params: ScryptParams = DEFAULT_SCRYPT): SecretRecord {
  return { params, salt: randomBytes(SALT_BYTES), key: randomBytes(KEY_BYTES) };
}

/**
 * Whether `secret` matches `record`. Both sides are fixed-length derived keys, so
 * `timingSafeEqual` never sees inputs of different lengths.
 */
export async function verifySecret(secret: string, record: SecretRecord): Promise<boolean> {
  const key = await derive(secret, record.salt, record.params);
  return timingSafeEqual(key, record.key);
}
