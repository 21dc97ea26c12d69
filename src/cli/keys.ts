/** `gatehouse keygen`, `pubkey` and `hash-secret`: the key and the secrets a config names. */
import { createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { mkdir, open, readFile, rm, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { text } from "node:stream/consumers";
import { generateKeyWithJwks } from "../tokens/keys.js";
import { hashSecret } from "../tokens/secrets.js";
import { readUnseen } from "./unseen.js";

// The --out and --jwks files: the private key readable by its owner only, the public JWKS by all.
const FILES = {
  out: { mode: 0o600, what: "a key" },
  jwks: { mode: 0o644, what: "a JWKS" },
} as const;

/**
 * Writes `content` to a new `file` with the mode of `option`'s file, in its folder, made (0700,
 * as ssh-keygen makes ~/.ssh) when missing; false, said on stderr, when it exists or cannot be
 * written. As ssh-keygen does, an existing file is never replaced (a key's tokens would stop
 * verifying): "wx" fails rather than follow or truncate a file.
 */
async function writeNew(file: string, content: string, option: keyof typeof FILES) {
  const { mode, what } = FILES[option];
  const folder = dirname(file);
  try {
    await mkdir(folder, { recursive: true, mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    const why = code === "EEXIST" ? "a file is in the way" : code;
    process.stderr.write(`gatehouse: cannot make the folder ${folder} for ${file} (${why})\n`);
    return false;
  }
  let handle: FileHandle | undefined;
  try {
    handle = await open(file, "wx", mode);
    // The mode itself, whatever the umask.
    await handle.chmod(mode);
    await handle.writeFile(content);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    process.stderr.write(
      code === "EEXIST"
        ? `gatehouse: ${file} already exists; keygen never overwrites ${what} (move it away first, or choose another --${option})\n`
        : `gatehouse: cannot write ${file} (${code})\n`,
    );
    return false;
  } finally {
    await handle?.close();
  }
}

/**
 * Writes a new PKCS#8 PEM key for `alg` to `out`, or prints it without `out`, and writes the JWKS
 * of its public key to `jwksFile` when one is named (a private_key_jwt client's `jwks_file`); 1
 * when a file cannot be written (nothing is printed, and no key is left without its JWKS), 2 for
 * an algorithm without a key.
 */
export async function keygen(
  alg: string,
  out: string | undefined,
  jwksFile: string | undefined,
): Promise<number> {
  if (alg !== "EdDSA" && alg !== "ES256") {
    process.stderr.write(
      "gatehouse: --alg must be EdDSA or ES256 (HS256 uses a secret in secret_env)\n",
    );
    return 2;
  }
  const { pem, jwks } = await generateKeyWithJwks(alg);
  if (out !== undefined && !(await writeNew(out, pem, "out"))) return 1;
  if (jwksFile !== undefined && !(await writeNew(jwksFile, jwks, "jwks"))) {
    // The key just written (it was new) goes too, so that the same command can be run again.
    if (out !== undefined) await rm(out, { force: true });
    return 1;
  }
  if (out === undefined) {
    process.stdout.write(pem);
    return 0;
  }
  process.stdout.write(
    jwksFile === undefined
      ? `wrote a new ${alg} signing key to ${out}; its public half: gatehouse pubkey ${out}\n`
      : `wrote a new ${alg} signing key to ${out} and its public JWKS to ${jwksFile}\n`,
  );
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

// Node's names of key types, as a sentence says them: "an RSA key", "an EC key on secp384r1".
const KEY_KINDS: Record<string, string> = {
  rsa: "an RSA key",
  "rsa-pss": "an RSA-PSS key",
  dsa: "a DSA key",
  dh: "a Diffie-Hellman key",
  ec: "an EC key",
  ed448: "an Ed448 key",
  x25519: "an X25519 key",
  x448: "an X448 key",
};

function keyKind(key: KeyObject): string {
  const type = key.asymmetricKeyType ?? "";
  const kind = KEY_KINDS[type] ?? `a key of type ${type}`;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  return curve === undefined ? kind : `${kind} on ${curve}`;
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
      `gatehouse: ${source} is ${keyKind(key)}; gatehouse signs with Ed25519 (EdDSA) or P-256 (ES256) keys\n`,
    );
    return 1;
  }
  process.stdout.write(createPublicKey(key).export({ type: "spki", format: "pem" }) as string);
  return 0;
}

// On a terminal the secret is typed twice, unseen, as passwd and htpasswd ask for one; the
// prompts go to stderr, so that stdout holds the hash alone.
async function typedSecret(): Promise<string | undefined> {
  const secret = await readUnseen("client secret: ");
  const again = await readUnseen("again: ");
  process.stderr.write("\n");
  if (again !== secret) {
    process.stderr.write("gatehouse: the two secrets differ; nothing was hashed\n");
    return undefined;
  }
  return secret;
}

/**
 * The shortest client secret hash-secret takes without a warning. RFC 6749 §10.10 asks that a
 * credential be guessed with a probability of at most 2^-128: 128 random bits, 32 characters in
 * hex, the form `openssl rand -hex 32` gives and the docs use (base64's `+` breaks HTTP Basic).
 */
const SHORTEST_SECRET = 32;

/**
 * Hashes a client secret typed on the terminal or read from stdin; 1 when there is none. A
 * shorter secret than SHORTEST_SECRET is hashed all the same, with a warning on stderr.
 */
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
  const length = [...secret].length;
  if (length < SHORTEST_SECRET) {
    process.stderr.write(
      `gatehouse: warning: the secret is ${length} characters; a client secret should be at least ${SHORTEST_SECRET} random ones (128 bits in hex, RFC 6749 §10.10), such as openssl rand -hex 32 makes\n`,
    );
  }
  process.stdout.write(`${await hashSecret(secret)}\n`);
  return 0;
}
