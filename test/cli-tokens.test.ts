/** `gatehouse keygen` and `gatehouse hash-secret`, run as the built command. */
import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  importPKCS8,
  jwtVerify,
  SignJWT,
  type JSONWebKeySet,
} from "jose";
import { parseSecretHash, verifySecret } from "../src/tokens/secrets.js";
import { demoClients } from "./helpers/shipped-config.js";

// The CLI is tested by running the built command (`npm test` builds before tap runs).
const CLI = "dist/src/cli.js";

function gatehouse(args: string[], input = "") {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    input,
    env: { ...process.env, GATEHOUSE_CONFIG: "" },
  });
}

/** keygen refused to write over `file`, the `--option` naming `what`: exit 1, stdout empty. */
function refusedExisting(
  t: Test,
  result: ReturnType<typeof gatehouse>,
  file: string,
  what: "a key" | "a JWKS",
  option: "out" | "jwks",
): void {
  t.equal(result.status, 1);
  t.equal(
    result.stderr,
    `gatehouse: ${file} already exists; keygen never overwrites ${what} (move it away first, or choose another --${option})\n`,
  );
  t.equal(result.stdout, "");
}

async function matches(hash: string, secret: string): Promise<boolean> {
  const record = parseSecretHash(hash);
  if (typeof record === "string") throw new Error(record);
  return verifySecret(secret, record);
}

t.test("keygen prints a PKCS#8 PEM key for EdDSA (default) or ES256", async (t) => {
  for (const [args, alg] of [
    [["keygen"], "EdDSA"],
    [["keygen", "--alg", "EdDSA"], "EdDSA"],
    [["keygen", "--alg", "ES256"], "ES256"],
  ] as const) {
    const result = gatehouse([...args]);
    t.equal(result.status, 0, args.join(" "));
    t.match(result.stdout, /^-----BEGIN PRIVATE KEY-----\n[\s\S]+\n-----END PRIVATE KEY-----\n$/);
    await t.resolves(importPKCS8(result.stdout, alg), `a ${alg} key`);
  }
  t.not(gatehouse(["keygen"]).stdout, gatehouse(["keygen"]).stdout, "a new key each time");
});

t.test("keygen --out writes the key for its owner only, and never over a file", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-keygen-"));
  const file = join(dir, "signing.pem");
  const written = gatehouse(["keygen", "--alg", "ES256", "--out", file]);
  t.equal(written.status, 0);
  t.equal(written.stderr, "");
  t.notMatch(written.stdout, /PRIVATE KEY/, "nothing secret on stdout");
  t.equal(
    written.stdout,
    `wrote a new ES256 signing key to ${file}; its public half: gatehouse pubkey ${file}\n`,
  );
  t.equal((await stat(file)).mode & 0o777, 0o600);
  const pem = await readFile(file, "utf8");
  await t.resolves(importPKCS8(pem, "ES256"));

  refusedExisting(t, gatehouse(["keygen", "-o", file]), file, "a key", "out");
  t.equal(await readFile(file, "utf8"), pem, "the existing key is untouched");

  const other = join(dir, "other.pem");
  await writeFile(other, "");
  t.equal(gatehouse(["keygen", "--out", other]).status, 1, "an empty file is not replaced either");
  // A missing folder is made, for its owner only, as a fresh clone's `keys/` is.
  const nested = join(dir, "keys", "new", "k.pem");
  t.equal(gatehouse(["keygen", "--out", nested]).status, 0, "into a folder that did not exist");
  t.equal((await stat(join(dir, "keys"))).mode & 0o777, 0o700, "made for its owner only");
  t.equal((await stat(nested)).mode & 0o777, 0o600);
  // A folder that cannot be made is named with why.
  const nowhere = gatehouse(["keygen", "--out", join(other, "k.pem")]);
  t.equal(nowhere.status, 1);
  t.match(
    nowhere.stderr,
    /^gatehouse: cannot make the folder .*other\.pem for .*k\.pem \(a file is in the way\)\n$/,
  );
});

t.test("keygen --jwks writes the public JWKS a private_key_jwt client needs", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-keygen-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  for (const alg of ["ES256", "EdDSA"] as const) {
    const file = join(dir, `${alg}.jwks.json`);
    const result = gatehouse(["keygen", "--alg", alg, "--jwks", file]);
    t.equal(result.status, 0, alg);
    const jwks = JSON.parse(await readFile(file, "utf8")) as JSONWebKeySet;
    const [jwk] = jwks.keys;
    t.match(jwk, { alg, use: "sig" });
    t.notOk(jwk !== undefined && "d" in jwk, "public members only");
    t.equal(jwk?.kid, jwk === undefined ? "" : await calculateJwkThumbprint(jwk), "RFC 7638 kid");
    const signed = await new SignJWT({ sub: "c" })
      .setProtectedHeader({ alg, kid: jwk?.kid as string })
      .sign(await importPKCS8(result.stdout, alg));
    await t.resolves(jwtVerify(signed, createLocalJWKSet(jwks)), "the printed key signs for it");
  }
  const unwritable = gatehouse(["keygen", "--jwks", join(dir, "ES256.jwks.json", "x.json")]);
  t.equal(unwritable.status, 1);
  t.match(
    unwritable.stderr,
    /cannot make the folder .*ES256\.jwks\.json .*\(a file is in the way\)/,
  );
  t.equal(unwritable.stdout, "", "no private key printed without its JWKS");
  const exists = gatehouse(["keygen", "--jwks", join(dir, "ES256.jwks.json")]);
  t.equal(exists.status, 1, "an existing JWKS is not replaced without --out either");
  t.equal(exists.stdout, "");
});

t.test("keygen --out --jwks writes the key for its owner and the JWKS for all", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-keygen-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const key = join(dir, "client.pem");
  const file = join(dir, "client.jwks.json");
  const written = gatehouse(["keygen", "--alg", "ES256", "--out", key, "--jwks", file]);
  t.equal(written.status, 0);
  t.equal(written.stderr, "");
  t.equal(
    written.stdout,
    `wrote a new ES256 signing key to ${key} and its public JWKS to ${file}\n`,
  );
  t.equal((await stat(key)).mode & 0o777, 0o600, "the private key: its owner only");
  t.equal((await stat(file)).mode & 0o777, 0o644, "the JWKS: readable by all");
  const pem = await readFile(key, "utf8");
  const jwksText = await readFile(file, "utf8");
  const jwks = JSON.parse(jwksText) as JSONWebKeySet;
  const kid = jwks.keys[0]?.kid as string;
  const signed = await new SignJWT({ sub: "c" })
    .setProtectedHeader({ alg: "ES256", kid })
    .sign(await importPKCS8(pem, "ES256"));
  await t.resolves(jwtVerify(signed, createLocalJWKSet(jwks)), "the written key signs for it");

  // Neither file is ever overwritten, and a refusal leaves no new key behind.
  const again = gatehouse(["keygen", "--out", join(dir, "new.pem"), "--jwks", file]);
  refusedExisting(t, again, file, "a JWKS", "jwks");
  t.equal(await readFile(file, "utf8"), jwksText, "the existing JWKS is untouched");
  t.strictSame((await readdir(dir)).sort(), ["client.jwks.json", "client.pem"], "no key left");
  const keyThere = gatehouse(["keygen", "--out", key, "--jwks", join(dir, "new.jwks.json")]);
  refusedExisting(t, keyThere, key, "a key", "out");
  t.equal(await readFile(key, "utf8"), pem, "the existing key is untouched");
  t.strictSame((await readdir(dir)).sort(), ["client.jwks.json", "client.pem"], "no JWKS written");
});

t.test("keygen refuses other algorithms; --alg belongs to keygen", async (t) => {
  const hs = gatehouse(["keygen", "--alg", "HS256"]);
  t.equal(hs.status, 2);
  t.match(hs.stderr, /--alg must be EdDSA or ES256/);
  t.equal(hs.stdout, "");
  t.equal(gatehouse(["check", "--alg", "ES256"]).status, 2);
});

t.test("hash-secret hashes stdin, stripping one trailing newline", async (t) => {
  for (const [input, secret] of [
    ["s3cret\n", "s3cret"],
    ["s3cret\r\n", "s3cret"],
    ["s3cret", "s3cret"],
    ["s3cret\n\n", "s3cret\n"],
    ["with spaces and ünïcode \n", "with spaces and ünïcode "],
  ] as const) {
    const result = gatehouse(["hash-secret"], input);
    t.equal(result.status, 0, JSON.stringify(input));
    t.match(result.stdout, /^scrypt\$ln=14,r=8,p=1\$[A-Za-z0-9_-]+\$[A-Za-z0-9_-]+\n$/);
    t.ok(await matches(result.stdout.trim(), secret), `verifies ${JSON.stringify(secret)}`);
    t.notOk(await matches(result.stdout.trim(), input + "x"), "and nothing else");
  }
});

t.test("hash-secret warns about a secret under 32 characters, and hashes it", async (t) => {
  const short = "0123456789abcdef0123456789abcde";
  const warned = gatehouse(["hash-secret"], `${short}\n`);
  t.equal(warned.status, 0);
  t.equal(
    warned.stderr,
    "gatehouse: warning: the secret is 31 characters; a client secret should be at least 32 random ones (128 bits in hex, RFC 6749 §10.10), such as openssl rand -hex 32 makes\n",
  );
  t.ok(await matches(warned.stdout.trim(), short), "the hash is printed all the same");
  // Characters, not bytes: 31 two-byte letters are still too few.
  t.match(gatehouse(["hash-secret"], "é".repeat(31)).stderr, /the secret is 31 characters/);
  const enough = gatehouse(["hash-secret"], `${short}f\n`);
  t.equal(enough.status, 0);
  t.equal(enough.stderr, "", "32 characters: no warning");
  t.ok(await matches(enough.stdout.trim(), `${short}f`));
});

t.test("hash-secret refuses an empty secret", async (t) => {
  for (const input of ["", "\n"]) {
    const result = gatehouse(["hash-secret"], input);
    t.equal(result.status, 1, JSON.stringify(input));
    t.match(result.stderr, /empty secret/);
    t.equal(result.stdout, "");
  }
});

t.test("the example config's demo client secrets match their secret_hash", async (t) => {
  const clients = demoClients(await readFile("proxy.config.yaml", "utf8"));
  t.strictSame(
    clients.map((client) => client.id),
    ["reporting-app", "inventory-app"],
  );
  for (const { id, secret, secretHash } of clients) t.ok(await matches(secretHash, secret), id);
});

// util-linux `script` runs the command on a pseudo-terminal of its own: what the terminal would
// show comes out on script's stdout, and what is written to script's stdin is typed.
const hasScript = spawnSync("script", ["--version"]).status === 0;

t.test(
  "hash-secret on a terminal asks twice and does not echo",
  { skip: !hasScript },
  async (t) => {
    const typed = (answers: readonly string[]) =>
      new Promise<{ code: number | null; screen: string }>((done) => {
        const child = spawn("script", [
          "-qec",
          `${process.execPath} ${CLI} hash-secret`,
          "/dev/null",
        ]);
        let screen = "";
        const prompts = ["client secret: ", "again: "];
        let answered = 0;
        child.stdout.on("data", (chunk: Buffer) => {
          screen += chunk.toString("utf8");
          // Each answer is typed once its prompt is shown, when the terminal no longer echoes.
          const prompt = prompts[answered];
          if (prompt !== undefined && screen.includes(prompt)) {
            child.stdin.write(`${answers[answered] ?? ""}\r`);
            answered++;
          }
        });
        child.once("exit", (code) => done({ code, screen }));
      });
    const secret = "typed-secret-5e0b";
    const same = await typed([secret, secret]);
    t.equal(same.code, 0);
    t.notOk(same.screen.includes(secret), "the secret is never shown");
    const hash = /scrypt\$\S+/.exec(same.screen)?.[0] as string;
    t.ok(await matches(hash, secret), "the hash is the typed secret's");
    const differ = await typed([secret, `${secret}x`]);
    t.equal(differ.code, 1);
    t.match(differ.screen, /the two secrets differ/);
    t.notMatch(differ.screen, /scrypt\$/);
  },
);
