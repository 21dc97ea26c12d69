/** `gatehouse keygen`, `pubkey` and `hash-secret`: the key and the secrets a config names. */
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { text } from "node:stream/consumers";
import { generateKeyWithJwks } from "../tokens/keys.js";
import { hashSecret } from "../tokens/secrets.js";

/**
 * Prints a new PKCS#8 PEM key for `alg`, and writes the JWKS of its public key to `jwksFile` when
 * one is named (a private_key_jwt client's `jwks_file`); 2 for an algorithm without one, 1 when the
 * file cannot be written.
 */
export async function keygen(alg: string, jwksFile: string | undefined): Promise<number> {
  if (alg !== "EdDSA" && alg !== "ES256") {
    process.stderr.write(
      "gatehouse: --alg must be EdDSA or ES256 (HS256 uses a secret in secret_env)\n",
    );
    return 2;
  }
  const { pem, jwks } = await generateKeyWithJwks(alg);
  if (jwksFile !== undefined) {
    try {
      await writeFile(jwksFile, jwks);
    } catch (error) {
      const reason = (error as NodeJS.ErrnoException).code ?? String(error);
      process.stderr.write(`gatehouse: cannot write ${jwksFile} (${reason})\n`);
      return 1;
    }
  }
  process.stdout.write(pem);
  return 0;
}

// The keys gatehouse signs with: EdDSA over Ed25519, ES256 over P-256 (RFC 7518 §3.4).
function signingAlgorithm(key: KeyObject): string | undefined {
  if (key.asymmetricKeyType === "ed25519") return "EdDSA";
  if (key.asymmetricKeyType === "ec" && key.asymmetricKeyDetails?.namedCurve === "prime256v1") {
    return "ES256";
  }
  return undefined;
}

/** Prints the SPKI PEM public key of the private key in `file` (stdin without one). */
export async function pubkey(file: string | undefined): Promise<number> {
  const source = file ?? "stdin";
  let pem: string;
  try {
    pem = file === undefined ? await text(process.stdin) : await readFile(file, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    process.stderr.write(`gatehouse: cannot read ${source} (${reason})\n`);
    return 1;
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    process.stderr.write(
      `gatehouse: ${source} holds no PEM private key (a PKCS#8 key from gatehouse keygen)\n`,
    );
    return 1;
  }
  if (signingAlgorithm(key) === undefined) {
    process.stderr.write(
      `gatehouse: ${source} is a ${key.asymmetricKeyType ?? "symmetric"} key; gatehouse signs with Ed25519 (EdDSA) or P-256 (ES256) keys\n`,
    );
    return 1;
  }
  process.stdout.write(createPublicKey(key).export({ type: "spki", format: "pem" }) as string);
  return 0;
}

// On a terminal the secret is typed twice, unseen, as passwd and htpasswd ask for one; the
// prompts go to stderr, so that stdout holds the hash alone.
async function typedSecret(): Promise<string | undefined> {
  const { read } = await import("read");
  const ask = (prompt: string) =>
    read({ prompt, silent: true, replace: "", output: process.stderr });
  const secret = await ask("client secret: ");
  const again = await ask("again: ");
  process.stderr.write("\n");
  if (again !== secret) {
    process.stderr.write("gatehouse: the two secrets differ; nothing was hashed\n");
    return undefined;
  }
  return secret;
}

/** Hashes a client secret typed on the terminal or read from stdin; 1 when there is none. */
export async function hashSecretCommand(): Promise<number> {
  let secret: string | undefined;
  if (process.stdin.isTTY) {
    try {
      secret = await typedSecret();
    } catch {
      process.stderr.write("\ngatehouse: cancelled\n");
      return 1;
    }
  } else {
    // One trailing \n or \r\n is stripped: echo and most editors add one.
    secret = (await text(process.stdin)).replace(/\r?\n$/, "");
  }
  if (secret === undefined) return 1;
  if (secret === "") {
    process.stderr.write("gatehouse: hash-secret read an empty secret\n");
    return 1;
  }
  process.stdout.write(`${await hashSecret(secret)}\n`);
  return 0;
}
