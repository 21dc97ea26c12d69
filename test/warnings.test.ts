/**
 * Warnings about valid files, from `check` and at the start, and the log's levels as words: run
 * as the built command, with a Redis server of the test's own.
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { generateKeyPem } from "../src/tokens/keys.js";
import { hashSecret } from "../src/tokens/secrets.js";
import { startCli } from "./helpers/cli.js";
import { eventually } from "./helpers/client.js";
import { startTestRedis } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

const CLI = "dist/src/cli.js";
const FLEET_WARNING = /replicas will not accept each other's tokens/;
const NO_KEY_WARNING = /^no signing key configured/;

const redis = await startTestRedis();
t.teardown(() => redis.close());
const upstream = await startUpstream();
t.teardown(() => upstream.close());
const dir = await mkdtemp(join(tmpdir(), "gatehouse-warnings-"));
await writeFile(join(dir, "signing.pem"), await generateKeyPem("EdDSA"));

function config(store: "memory" | "redis", signing = "", extra = ""): string {
  return `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstream.url}
tokens:
  signing:
    algorithm: EdDSA
${signing}limits:
  store: ${store}
  redis:
    url: ${redis.url}
${extra}`;
}

async function written(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

function check(path: string) {
  return spawnSync(process.execPath, [CLI, "check", "--config", path], { encoding: "utf8" });
}

t.test("check warns at limits.store when Redis replicas share no key, and exits 0", async (t) => {
  const path = await written("redis-no-key.yaml", config("redis"));
  const result = check(path);
  t.equal(result.status, 0);
  t.match(result.stdout, /: ok \(/);
  const lines = result.stderr.trimEnd().split("\n");
  t.equal(lines.length, 1);
  t.match(lines[0], `${path}:9:10 warning: limits.store: is redis but tokens.signing has neither`);
  t.match(lines[0], FLEET_WARNING);
});

/**
 * A file with the own client `billing` and the provider's clients `providerIds`, checked: its exit
 * status and what it printed, with the file's path.
 */
async function checkProviderIds(name: string, providerIds: readonly string[]) {
  const path = await written(
    name,
    `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstream.url}
tokens:
  trusted_issuers:
    - name: corp
      issuer: https://login.example.com/realms/corp
      jwks_uri: https://login.example.com/realms/corp/certs
clients:
  - id: billing
    secret_hash: "${await hashSecret("a-secret-of-its-own-long-enough-to-pass")}"
${providerIds.map((id) => `  - id: ${id}\n    issuer: corp\n`).join("")}`,
  );
  return { path, ...check(path) };
}

t.test("check warns at a provider's client listed with an own client's id", async (t) => {
  const result = await checkProviderIds("shared-id.yaml", ["billing", "reports"]);
  t.equal(result.status, 0, "accepted, as the file says");
  t.equal(
    result.stderr,
    `${result.path}:13:9 warning: clients[1].id: is also the id of one of gatehouse's own clients: the upstream gets X-Client-Id billing for both, told apart only by X-Client-Issuer\n`,
  );
});

t.test(
  "check warns at a provider's client whose id differs from an own one's in case",
  async (t) => {
    // An upstream that compares ids without case, as the config's duplicate check does, takes the
    // two for one.
    const result = await checkProviderIds("id-case.yaml", ["Billing"]);
    t.equal(result.status, 0, "accepted, as the file says");
    t.equal(
      result.stderr,
      `${result.path}:13:9 warning: clients[1].id: differs only in case from billing, the id of one of gatehouse's own clients: an upstream that compares ids without case takes the two for one, told apart only by X-Client-Issuer\n`,
    );
  },
);

t.test("no warning with a shared key, or with the memory store", async (t) => {
  for (const [name, text] of [
    ["redis-key.yaml", config("redis", "    key_file: signing.pem\n")],
    ["memory.yaml", config("memory")],
  ] as const) {
    const result = check(await written(name, text));
    t.equal(result.status, 0, name);
    t.equal(result.stderr, "", name);
  }
});

t.test(
  "the start logs each warning once, with the level as a word; reloads repeat none",
  async (t) => {
    const path = await written("run.yaml", config("redis"));
    const cli = await startCli(["--config", path]);
    const lines = cli.lines();
    const warnings = () => cli.lines().filter((line) => line.level === "warn");
    t.ok(
      lines.every((line) => typeof line.level === "string"),
      "every level is a word",
    );
    t.equal(lines.find((line) => line.msg === "gatehouse listening")?.level, "info");
    t.equal(warnings().filter((line) => FLEET_WARNING.test(String(line.msg))).length, 1);
    t.equal(warnings().filter((line) => NO_KEY_WARNING.test(String(line.msg))).length, 1);
    t.match(
      warnings().find((line) => FLEET_WARNING.test(String(line.msg))),
      { line: 9, col: 10 },
    );

    // Two reloads that keep both reasons for a warning: the routes change, the store and key do not.
    for (const route of ["/a", "/b"]) {
      await writeFile(
        path,
        config("redis", "", `routes:\n  - path: ${route}\n    methods: [GET]\n`),
      );
      const reloads = () => cli.lines().filter((line) => line.msg === "config reloaded").length;
      const before = reloads();
      cli.child.kill("SIGHUP");
      t.ok(await eventually(async () => reloads() > before), `reloaded with ${route}`);
    }
    t.equal(warnings().length, 2, "still one line per warning");
    t.equal(await cli.stop("SIGTERM"), 0);
  },
);

t.test(
  "check and the start warn about a client secret_env shorter than 32 characters",
  async (t) => {
    const clients = `clients:
  - id: short
    secret_env: SHORT_CLIENT_SECRET
  - id: long
    secret_env: LONG_CLIENT_SECRET
`;
    const path = await written(
      "short-secret.yaml",
      config("memory", "    key_file: signing.pem\n", clients),
    );
    const env = {
      ...process.env,
      SHORT_CLIENT_SECRET: "x".repeat(31),
      LONG_CLIENT_SECRET: "y".repeat(32),
    };
    const result = spawnSync(process.execPath, [CLI, "check", "--config", path], {
      encoding: "utf8",
      env,
    });
    t.equal(result.status, 0, "a warning, not an error");
    const lines = result.stderr.trimEnd().split("\n");
    t.equal(lines.length, 1, "only the short one");
    t.match(
      lines[0],
      `${path}:15:17 warning: clients[0].secret_env: names SHORT_CLIENT_SECRET, which holds 31 characters`,
    );
    const single = spawnSync(process.execPath, [CLI, "check", "--config", path], {
      encoding: "utf8",
      env: { ...env, SHORT_CLIENT_SECRET: "x" },
    });
    t.match(single.stderr, /names SHORT_CLIENT_SECRET, which holds 1 character; /);

    const cli = await startCli(["--config", path], env);
    const warned = cli.lines().filter((line) => line.level === "warn");
    t.match(warned, [{ msg: /names SHORT_CLIENT_SECRET, which holds 31 characters/ }]);
    t.equal(warned.length, 1);
    t.equal(await cli.stop("SIGTERM"), 0);
  },
);
