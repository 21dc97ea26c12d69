/** `gatehouse version`, `help`, `pubkey`, the exit codes and `npm start`, run as commands. */
import { spawn, spawnSync } from "node:child_process";
import { createPublicKey, generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { generateKeyPem, keyPairFromPem, verificationKeyFromPem } from "../src/tokens/keys.js";
import { startUpstream } from "./helpers/upstream.js";

// The CLI is tested by running the built command (`npm test` builds before tap runs).
const CLI = "dist/src/cli.js";
const { version } = JSON.parse(await readFile("package.json", "utf8")) as { version: string };
const COMMANDS = ["run", "check", "hash-secret", "keygen", "pubkey", "version", "help"];

function gatehouse(args: string[], input = "", env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    input,
    env: { ...process.env, GATEHOUSE_CONFIG: "", ...env },
  });
}

const dir = await mkdtemp(join(tmpdir(), "gatehouse-cli-commands-"));

t.test("version and --version print package.json's version", async (t) => {
  for (const args of [["version"], ["--version"]]) {
    const result = gatehouse(args);
    t.equal(result.status, 0, args.join(" "));
    t.equal(result.stdout, `${version}\n`);
    t.equal(result.stderr, "");
  }
  t.equal(gatehouse(["version", "extra"]).status, 2);
  t.equal(gatehouse(["check", "--version"]).status, 2, "--version is not an option of check");
});

t.test("help and --help list every command with the exit codes", async (t) => {
  for (const args of [["help"], ["--help"], ["-h"]]) {
    const result = gatehouse(args);
    t.equal(result.status, 0, args.join(" "));
    for (const name of COMMANDS)
      t.match(result.stdout, new RegExp(`^  gatehouse \\[?${name}`, "m"));
    t.match(result.stdout, /Exit codes: 0 success, 1 failure, 2 usage error\./);
  }
});

t.test("help COMMAND and COMMAND --help print that command's help", async (t) => {
  for (const name of COMMANDS) {
    const viaHelp = gatehouse(["help", name]);
    const viaOption = gatehouse([name, "--help"]);
    t.equal(viaHelp.status, 0, `help ${name}`);
    t.equal(viaOption.status, 0, `${name} --help`);
    t.equal(viaHelp.stdout, viaOption.stdout);
    t.match(viaHelp.stdout, new RegExp(`^usage: gatehouse \\[?${name}`));
  }
  t.match(gatehouse(["help", "check"]).stdout, /\$GATEHOUSE_CONFIG/);
  const unknown = gatehouse(["help", "nope"]);
  t.equal(unknown.status, 2);
  t.match(unknown.stderr, /no command "nope"/);
});

t.test("usage errors exit 2 and say what was wrong", async (t) => {
  for (const [args, message] of [
    [["frobnicate"], /unknown command "frobnicate"/],
    [["--bogus"], /Unknown option '--bogus'/],
    [["keygen", "--config", "x.yaml"], /--config is an option of run and check, not of keygen/],
    [["check", "--alg", "ES256"], /--alg is an option of keygen, not of check/],
    [["pubkey", "a.pem", "b.pem"], /unexpected argument "b\.pem": gatehouse pubkey \[FILE\]/],
    [["check", "extra"], /unexpected argument "extra"/],
    [["--config"], /argument missing/],
  ] as const) {
    const result = gatehouse([...args]);
    t.equal(result.status, 2, args.join(" "));
    t.match(result.stderr, message);
    t.equal(result.stdout, "");
  }
});

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
    /is a rsa key; gatehouse signs with Ed25519 \(EdDSA\) or P-256 \(ES256\)/,
  );
  t.equal(wrongKind.stdout, "");
});

t.test("npx gatehouse runs the built command from the repository", async (t) => {
  const result = spawnSync("npx", ["--offline", "gatehouse", "version"], { encoding: "utf8" });
  t.equal(result.status, 0, result.stderr);
  t.equal(result.stdout, `${version}\n`);
});

// `npm start` runs what package.json's start script says, without its build step here (another
// test file may be running the built files at the same time). npm runs the script through a
// shell, which does not pass SIGTERM on: the whole process group is signalled, and the run is
// over when every process has let go of the output.
function npmStart(env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  const child = spawn("npm", ["start", "--ignore-scripts", "--silent"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  const collect = (chunk: Buffer) => {
    output += chunk.toString("utf8");
    if (output.includes('"msg":"gatehouse listening"'))
      process.kill(-(child.pid as number), "SIGTERM");
  };
  child.stdout.on("data", collect);
  child.stderr.on("data", collect);
  return new Promise((done) => child.once("close", (code) => done({ code, output })));
}

t.test("npm start runs $GATEHOUSE_CONFIG when it is set", async (t) => {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const config = join(dir, "start.yaml");
  await writeFile(
    config,
    `listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstream:\n  url: ${upstream.url}\n`,
  );
  const started = await npmStart({ GATEHOUSE_CONFIG: config });
  t.match(started.output, `"upstream":"${upstream.url}/"`, "listening in front of its upstream");
  const missing = await npmStart({ GATEHOUSE_CONFIG: join(dir, "absent.yaml") });
  t.not(missing.code, 0);
  t.match(missing.output, /absent\.yaml:1:1 cannot be read \(ENOENT\)/);
  const scripts = (
    JSON.parse(await readFile("package.json", "utf8")) as {
      scripts: Record<string, string>;
    }
  ).scripts;
  t.notMatch(scripts.start, /--config|-c /, "the script leaves the choice to the command");
  const fallback = gatehouse(["check"], "", { GATEHOUSE_CONFIG: "" });
  t.match(fallback.stdout, /^proxy\.config\.yaml: ok/, "unset or empty: proxy.config.yaml");
});
