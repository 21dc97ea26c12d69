/** `gatehouse pubkey`, run as a command. */
import { spawnSync } from "node:child_process";
import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { generateKeyPem, keyPairFromPem, verificationKeyFromPem } from "../src/tokens/keys.js";

// The CLI is tested by running the built command (`npm test` builds before tap runs).
const CLI = "dist/src/cli.js";

function gatehouse(args: string[], input = "", env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    input,
    env: { ...process.env, GATEHOUSE_CONFIG: "", ...env },
  });
}

const dir = await mkdtemp(join(tmpdir(), "gatehouse-cli-pubkey-"));

t.test(
  "pubkey prints the SPKI PEM of a private key file, which previous_keys accepts",
  async (t) => {
    for (const alg of ["EdDSA", "ES256"] as const) {
      const pem = await generateKeyPem(alg);
      const file = join(dir, `${alg}.pem`);
      await writeFile(file, pem);
      const result = gatehouse(["pubkey", file]);
      t.equal(result.status, 0, alg);
      t.match(result.stdout, /^-----BEGIN PUBLIC KEY-----\n[\s\S]+\n-----END PUBLIC KEY-----\n$/);
      const published = await verificationKeyFromPem(result.stdout, alg);
      t.equal(published.kid, (await keyPairFromPem(pem, alg)).kid, "the same key's public half");
      t.equal(gatehouse(["pubkey"], pem).stdout, result.stdout, "stdin without FILE");
    }
  },
);

t.test("pubkey refuses what is not a signing key gatehouse can use", async (t) => {
  const missing = gatehouse(["pubkey", join(dir, "missing.pem")]);
  t.equal(missing.status, 1);
  t.match(missing.stderr, /cannot read .*missing\.pem \(ENOENT\)/);
  const publicPem = createPublicKey(await generateKeyPem("EdDSA")).export({
    type: "spki",
    format: "pem",
  }) as string;
  const notPrivate = gatehouse(["pubkey"], publicPem);
  t.equal(notPrivate.status, 1);
  t.match(notPrivate.stderr, /stdin holds no PEM private key/);
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
    type: "pkcs8",
    format: "pem",
  }) as string;
  const wrongKind = gatehouse(["pubkey"], rsa);
  t.equal(wrongKind.status, 1);
  t.match(
    wrongKind.stderr,
    /^gatehouse: stdin is an RSA key; gatehouse signs with Ed25519 \(EdDSA\) or P-256 \(ES256\) keys\n$/,
  );
  t.equal(wrongKind.stdout, "");
  const p384 = generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey.export({
    type: "pkcs8",
    format: "pem",
  }) as string;
  t.match(gatehouse(["pubkey"], p384).stderr, /^gatehouse: stdin is an EC key on secp384r1; /);
});
