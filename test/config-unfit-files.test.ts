/**
 * The configuration and the files it names are read only when they are regular files of a
 * bounded size: a FIFO, a folder or an oversized file at a configured path is a refused file,
 * named with what is there, whether `check` reads it, a start does or a reload does; no read
 * waits on a FIFO, and gatehouse goes on serving.
 */
import { spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { readPem } from "../src/config/environment.js";
import { digestNow } from "../src/config/named-files.js";
import { send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { sampleValue, scrape } from "./helpers/metrics.js";
import { assertion, assertionRequest, keyClient } from "./helpers/assertions.js";
import { startUpstream } from "./helpers/upstream.js";

const CLI = "dist/src/cli.js";
const ISSUER = "https://auth.example.com";
const upstream = await startUpstream();
t.teardown(() => upstream.close());
const dir = await mkdtemp(join(tmpdir(), "gatehouse-unfit-"));
t.teardown(() => rm(dir, { recursive: true, force: true }));

const batch = await keyClient("batch", "ES256");
const JWKS = JSON.stringify({ keys: [batch.jwk] });

function config(jwksFile: string): string {
  return configFor(
    upstream.url,
    `tokens:
  issuer: ${ISSUER}
clients:
  - id: batch
    jwks_file: ${jwksFile}
routes:
  - path: /v1/items
    methods: [GET]
`,
  );
}

/** `gatehouse check` on `path`, bounded: a read that waited would show as a timeout. */
function check(path: string) {
  return spawnSync(process.execPath, [CLI, "check", "--config", path], {
    encoding: "utf8",
    timeout: 60_000,
  });
}

/** Makes `name` in `dir` hold `kind`: a FIFO, a folder, or a file over 1 MiB. */
async function unfit(name: string, kind: string): Promise<string> {
  const path = join(dir, name);
  if (kind === "FIFO") execFileSync("mkfifo", [path]);
  else if (kind === "folder") await mkdir(path);
  else await writeFile(path, `{"keys": [], "pad": "${"x".repeat(1024 * 1024)}"}`);
  return path;
}

const WHAT: Record<string, RegExp> = {
  FIFO: /\(a FIFO, not a regular file\)/,
  folder: /\(a folder, not a regular file\)/,
  large: /\(\d+ bytes, over the 1 MiB a file may hold\)/,
};

t.test("check names a FIFO, a folder or an oversized file at jwks_file", async (t) => {
  for (const kind of ["FIFO", "folder", "large"]) {
    const jwks = await unfit(`check-${kind}.jwks.json`, kind);
    const path = join(dir, `check-${kind}.yaml`);
    await writeFile(path, config(jwks));
    const result = check(path);
    t.equal(result.error, undefined, `${kind}: check did not wait`);
    t.equal(result.status, 1, kind);
    t.match(result.stderr, /clients\[0\]\.jwks_file: cannot read /, kind);
    t.match(result.stderr, WHAT[kind] as RegExp, kind);
  }
});

t.test("check names a FIFO given as the configuration itself", async (t) => {
  const path = await unfit("config-fifo.yaml", "FIFO");
  const result = check(path);
  t.equal(result.error, undefined, "check did not wait");
  t.equal(result.status, 1);
  t.match(result.stderr, /cannot be read \(a FIFO, not a regular file\)/);
});

t.test("a FIFO put at jwks_file is a refused reload; gatehouse goes on serving", async (t) => {
  const gh = await startTestGatehouse(config("keys/batch.jwks.json"), {
    files: { "keys/batch.jwks.json": JWKS },
  });
  t.teardown(() => gh.close());
  const request = async () =>
    (await assertionRequest(gh.url, await assertion(batch, Date.now(), ISSUER))).status;
  t.equal(await request(), 200);
  const file = join(gh.dir, "keys", "batch.jwks.json");
  await rm(file);
  execFileSync("mkfifo", [file]);
  await gh.gatehouse.reload("SIGHUP");
  const failed = sampleValue(await scrape(gh), "gatehouse_config_reloads_total", {
    result: "failure",
  });
  t.equal(failed, 1, "the reload is refused");
  const line = gh.logs.find((l) => String(l.msg).startsWith("config reload failed"));
  t.match(line?.problems, [/jwks_file: cannot read .*\(a FIFO, not a regular file\)/]);
  t.equal((await send(`${gh.url}/healthz`)).status, 200, "the process answers");
  t.equal(await request(), 200, "the keys in force keep working");
});

t.test("what a refused file records is what the watch compares it with", async (t) => {
  // Otherwise the watch would see a change that is none, and reload again after every reload.
  for (const kind of ["FIFO", "folder", "large"]) {
    const file = await unfit(`digest-${kind}.jwks.json`, kind);
    const context = { baseDir: dir, problems: [], read: new Map<string, string>() };
    t.equal(await readPem(context, file, ["jwks_file"]), undefined, `${kind}: refused`);
    t.equal(context.read.get(file), await digestNow(file), `${kind}: the same digest`);
  }
});
