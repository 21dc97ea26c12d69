/**
 * Every command that README, docs/ and deploy/ give for making a secret makes one that survives
 * HTTP Basic unchanged: RFC 6749 §2.3.1 form-decodes the client id and secret, so a `+` (half of
 * all 32-byte base64 strings hold one) turns into a space and `curl -u` gets 401; `%` starts an
 * escape, and `/` and `=` are not safe in every place a secret is pasted. Hex and unpadded
 * base64url are.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import t from "tap";
import { manualFiles } from "./helpers/docs.js";

// A line that draws random bytes for a secret.
const GENERATOR =
  /openssl\s+rand\b|\/dev\/u?random|randomBytes\(|\btoken_(?:hex|urlsafe|bytes)\(|\bpwgen\b|gen-random/;

/** Why the generator on `line` can produce `+`, `/`, `=` or `%`; undefined when it cannot. */
function unsafeGenerator(line: string): string | undefined {
  if (!GENERATOR.test(line)) return undefined;
  if (/openssl\s+rand\s+(?!-hex\b)/.test(line)) {
    return "openssl rand without -hex";
  }
  if (/\bbase64(?!url)\b|--base64\b/.test(line)) return "base64 (+, / and =)";
  if (/\bbasenc\b|base64url\s*\|/.test(line)) return "padded base64url (=)";
  if (/\bpwgen\b.*(?:\s-\w*y|--symbols)/.test(line)) return "pwgen symbols (% and +)";
  return undefined;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

t.test("the rule refuses generators that can make +, /, = or %", async (t) => {
  for (const line of [
    'kubectl create secret generic x --from-literal=s="$(openssl rand -base64 32)"',
    "openssl rand 32 > secret.bin",
    'printf "%s %s" "$(openssl rand -hex 32)" "$(openssl rand 32)"',
    "head -c 32 /dev/urandom | base64",
    "head -c 32 /dev/urandom | basenc --base64url",
    'node -e \'console.log(require("crypto").randomBytes(32).toString("base64"))\'',
    "pwgen -sy 40 1",
  ]) {
    t.ok(unsafeGenerator(line), line);
  }
  for (const line of [
    'kubectl create secret generic x --from-literal=s="$(openssl rand -hex 32)"',
    "head -c 32 /dev/urandom | xxd -p -c 64",
    'node -e \'console.log(require("crypto").randomBytes(32).toString("base64url"))\'',
    "python3 -c 'import secrets; print(secrets.token_hex(32))'",
    "the password hash is base64 of scrypt's key",
  ]) {
    t.equal(unsafeGenerator(line), undefined, line);
  }
});

t.test("README, docs/ and deploy/ make secrets in hex or base64url", async (t) => {
  const files = [...manualFiles(), ...(await filesUnder("deploy"))];
  let generators = 0;
  for (const file of files) {
    const lines = (await readFile(file, "utf8")).split("\n");
    lines.forEach((line, i) => {
      if (!GENERATOR.test(line)) return;
      generators++;
      t.equal(unsafeGenerator(line), undefined, `${file}:${i + 1}: ${line.trim()}`);
    });
  }
  t.ok(generators >= 3, `the scan found the secret-making commands (${generators})`);
});
