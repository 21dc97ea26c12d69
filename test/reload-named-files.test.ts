/**
 * The files a configuration names are part of it (docs/operations.md, Reload): a client's JWKS
 * file, the signing key and previous keys edited while running are applied by the watch and by
 * SIGHUP, and a bad one is refused whole. Only the files read start a reload, not what else is
 * written in their folder; a bad content is reported once.
 */
import { link, mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeProtectedHeader, exportPKCS8, exportSPKI, generateKeyPair } from "jose";
import t from "tap";
import { fileHash } from "../src/config/named-files.js";
import { loadSnapshot } from "../src/config/snapshot.js";
import { startCli } from "./helpers/cli.js";
import { refusingPort } from "./helpers/ports.js";
import { eventually, send } from "./helpers/client.js";
import {
  configFor,
  memoryLogger,
  startTestGatehouse,
  type TestGatehouse,
} from "./helpers/gatehouse.js";
import { startGatehouse } from "../src/server.js";
import { metric, type Scraped } from "./helpers/metrics.js";
import { assertion, assertionRequest, keyClient, type KeyClient } from "./helpers/assertions.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

// A reload lands within about 150 ms of a write; the deadline only ends a wait that has failed.
const DEADLINE_MS = 30_000;
const ISSUER = "gatehouse";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

// Refused attempts are counted per address: the tests make a few, and must not be held back.
const TOKENS = `tokens:
  issuer: ${ISSUER}
  failure_limit: { limit: 1000, window: 1h }
`;
const ROUTES = `routes:
  - path: /v1/items
    methods: [GET]
`;

/** Two keys of one private_key_jwt client, and the JWKS file text holding `keys` of them. */
const first = await keyClient("batch", "ES256");
const second = await keyClient("batch", "EdDSA");
const jwks = (...keys: KeyClient[]): string => JSON.stringify({ keys: keys.map((k) => k.jwk) });

async function assertionStatus(url: string, key: KeyClient): Promise<number> {
  return (await assertionRequest(url, await assertion(key, Date.now(), ISSUER))).status;
}

function reloads(from: Scraped, result: string): Promise<number> {
  return metric(from, "gatehouse_config_reloads_total", { result }).then((n) => n || 0);
}

/** Writes `text` to `path` in one step (a rename), as a deployment tool does. */
async function replace(path: string, text: string): Promise<void> {
  const temporary = `${path}.tmp`;
  await writeFile(temporary, text);
  await rename(temporary, path);
}

function jwksConfig(jwksFile: string): string {
  return configFor(
    upstream.url,
    `${TOKENS}clients:\n  - id: batch\n    jwks_file: ${jwksFile}\n${ROUTES}`,
  );
}

t.test("a key removed from a client's JWKS file is refused once the file changes", async (t) => {
  // In a folder of its own, which is watched as the config's folder is.
  const gh = await startTestGatehouse(jwksConfig("./keys/batch.jwks.json"), {
    watch: true,
    files: { "keys/batch.jwks.json": jwks(first, second) },
  });
  t.teardown(() => gh.close());
  const file = join(gh.dir, "keys", "batch.jwks.json");
  t.equal(await assertionStatus(gh.url, first), 200, "both keys work at first");
  t.equal(await assertionStatus(gh.url, second), 200);

  await replace(file, jwks(second));
  t.ok(
    await eventually(async () => (await assertionStatus(gh.url, first)) === 401, DEADLINE_MS),
    "the removed key's assertions are refused",
  );
  const refused = await assertionRequest(gh.url, await assertion(first, Date.now(), ISSUER));
  t.match(refused.json, { error: "invalid_client" });
  t.equal(await assertionStatus(gh.url, second), 200, "the kept key still works");
  t.match(
    gh.logs.findLast((l) => l.msg === "config reloaded"),
    {
      trigger: "file change",
      changed: { sections: [], files: [file] },
    },
  );

  await replace(file, '{"keys": [');
  t.ok(
    await eventually(async () => (await reloads(gh, "failure")) === 1, DEADLINE_MS),
    "a broken JWKS file fails the reload",
  );
  const failure = gh.logs.find((l) => l.msg?.toString().startsWith("config reload failed"));
  t.match(failure?.problems, [/clients\[0\]\.jwks_file: /], "named at its key");
  t.equal(await assertionStatus(gh.url, second), 200, "the keys in force keep working");
  t.equal(await assertionStatus(gh.url, first), 401, "and the removed one stays refused");
});

t.test("a JWKS file in a Kubernetes Secret volume is followed through its swaps", async (t) => {
  // The kubelet's layout: batch.jwks.json -> ..data/batch.jwks.json, ..data -> ..<timestamp>;
  // an update writes a new timestamped folder and renames a new ..data link over the old one.
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-secret-"));
  const secret = join(dir, "secret");
  let stamp = 0;
  const publish = async (text: string): Promise<void> => {
    const folder = `..2026_01_01_00_00_00.${++stamp}`;
    await mkdir(join(secret, folder), { recursive: true });
    await writeFile(join(secret, folder, "batch.jwks.json"), text);
    await symlink(folder, join(secret, "..data_tmp"));
    await rename(join(secret, "..data_tmp"), join(secret, "..data"));
  };
  await publish(jwks(first, second));
  await symlink("..data/batch.jwks.json", join(secret, "batch.jwks.json"));
  const configPath = join(dir, "proxy.config.yaml");
  await writeFile(configPath, jwksConfig("./secret/batch.jwks.json"));
  const { log } = memoryLogger();
  const gatehouse = await startGatehouse({
    configPath,
    log,
    watch: true,
    listen: { host: "127.0.0.1", port: 0 },
    adminListen: { host: "127.0.0.1", port: 0 },
  });
  t.teardown(async () => {
    await gatehouse.shutdown();
    await rm(dir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${gatehouse.address.port}`;
  t.equal(await assertionStatus(url, first), 200);
  await publish(jwks(second));
  t.ok(
    await eventually(async () => (await assertionStatus(url, first)) === 401, DEADLINE_MS),
    "the first swap is applied",
  );
  await publish(jwks(first));
  t.ok(
    await eventually(async () => (await assertionStatus(url, first)) === 200, DEADLINE_MS),
    "and the next",
  );
  t.equal(await assertionStatus(url, second), 401);
});

t.test("SIGHUP applies a JWKS file the watch does not see (the built CLI)", async (t) => {
  // The JWKS file is a hard link into another folder: writes through the other name are
  // reported to that folder only, so only SIGHUP applies them.
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-jwks-hup-"));
  await mkdir(join(dir, "real"));
  const real = join(dir, "real", "batch.jwks.json");
  await writeFile(real, jwks(first, second));
  await link(real, join(dir, "batch.jwks.json"));
  const yaml = `listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n${jwksConfig("./batch.jwks.json")}`;
  await writeFile(join(dir, "proxy.config.yaml"), yaml);
  const cli = await startCli(["--config", join(dir, "proxy.config.yaml")]);
  t.teardown(async () => {
    if (cli.child.exitCode === null) await cli.stop("SIGTERM");
    await rm(dir, { recursive: true, force: true });
  });
  t.equal(await assertionStatus(cli.url, first), 200);

  await writeFile(real, jwks(second));
  cli.child.kill("SIGHUP");
  await cli.line((l) => l.msg === "config reloaded");
  t.equal(await assertionStatus(cli.url, first), 401, "the removed key is refused after SIGHUP");
  t.equal(await assertionStatus(cli.url, second), 200, "the kept key works");

  await writeFile(real, "{}");
  cli.child.kill("SIGHUP");
  const failure = await cli.line(
    (l) => l.msg?.toString().startsWith("config reload failed") === true,
  );
  t.match(failure, { trigger: "SIGHUP", problems: [/clients\[0\]\.jwks_file: /] });
  t.equal(await reloads(cli.adminUrl, "failure"), 1, "counted");
  t.equal(await assertionStatus(cli.url, second), 200, "the keys in force stay");
  t.equal(await cli.stop("SIGTERM"), 0);
});

async function pemPair(): Promise<{ privatePem: string; publicPem: string }> {
  const { privateKey, publicKey } = await generateKeyPair("EdDSA", { extractable: true });
  return { privatePem: await exportPKCS8(privateKey), publicPem: await exportSPKI(publicKey) };
}

t.test("the signing key and previous keys files are applied when they change", async (t) => {
  const client = { id: "reporting-app", secret: "a3f1c9d2e8b7a6f5c4d3e2f1a0b9c8d7" };
  const [a, b, c] = [await pemPair(), await pemPair(), await pemPair()];
  const signing = `  signing:\n    algorithm: EdDSA\n    key_file: ./current.pem\n  previous_keys: [./previous.pem]\n`;
  const gh = await startTestGatehouse(
    configFor(upstream.url, `${TOKENS}${signing}${await clientsYaml([client])}${ROUTES}`),
    {
      watch: true,
      files: { "current.pem": a.privatePem, "previous.pem": b.publicPem },
    },
  );
  t.teardown(() => gh.close());
  const kid = async () => decodeProtectedHeader(await obtainToken(gh.url, client)).kid;
  const opens = async (token: string) =>
    (await send(`${gh.url}/v1/items`, { headers: { authorization: `Bearer ${token}` } })).status;
  const signedByA = await obtainToken(gh.url, client);
  const kidA = decodeProtectedHeader(signedByA).kid;
  t.equal(await opens(signedByA), 200);

  // Rotation: A's public half becomes a previous key, then C signs.
  await replace(join(gh.dir, "previous.pem"), a.publicPem);
  await replace(join(gh.dir, "current.pem"), c.privatePem);
  t.ok(
    await eventually(async () => (await kid()) !== kidA, DEADLINE_MS),
    "new tokens carry the new key's kid",
  );
  t.ok(
    await eventually(async () => (await opens(signedByA)) === 200, DEADLINE_MS),
    "a token of the old key is accepted while it is a previous key",
  );

  await replace(join(gh.dir, "previous.pem"), b.publicPem);
  t.ok(
    await eventually(async () => (await opens(signedByA)) === 401, DEADLINE_MS),
    "and refused once it is no longer one",
  );
  t.equal(await opens(await obtainToken(gh.url, client)), 200, "the current key's tokens work");
});

/** Appends lines to `path` until stopped; resolves `written(n)` once n lines are written. */
function logWriter(path: string) {
  let lines = 0;
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      await writeFile(path, `{"line":${++lines}}\n`, { flag: "a" });
    }
  })();
  return {
    written: (n: number) => eventually(async () => lines >= n, DEADLINE_MS),
    async stop() {
      stopped = true;
      await done;
    },
  };
}

async function counts(gh: TestGatehouse): Promise<Record<string, number>> {
  return {
    success: await reloads(gh, "success"),
    failure: await reloads(gh, "failure"),
    unchanged: await reloads(gh, "unchanged"),
  };
}

t.test("a log written beside the config never starts a reload", async (t) => {
  const gh = await startTestGatehouse(configFor(upstream.url, `${TOKENS}${ROUTES}`), {
    watch: true,
  });
  t.teardown(() => gh.close());
  const before = await counts(gh);
  const writer = logWriter(join(gh.dir, "gatehouse.log"));
  t.ok(await writer.written(500), "the log is being written");
  // A real change made while the log is written: once it is in force, every event the log
  // raised before it has been handled.
  await replace(
    gh.configPath,
    configFor(upstream.url, `${TOKENS}${ROUTES}  - path: /v1/later\n    methods: [GET]\n`),
  );
  t.ok(
    await eventually(async () => (await send(`${gh.url}/v1/later`)).status === 401, DEADLINE_MS),
    "the config change is applied while the log is written",
  );
  await writer.stop();
  t.strictSame(
    await counts(gh),
    { ...before, success: before.success + 1 },
    "one reload, for the config change, and none for the log",
  );
  t.equal(gh.logs.filter((l) => l.msg === "config reloaded").length, 1);
});

t.test("a bad content is reported once; putting the content in force back is said", async (t) => {
  const good = configFor(upstream.url, `${TOKENS}${ROUTES}`);
  const gh = await startTestGatehouse(good, { watch: true });
  t.teardown(() => gh.close());
  const failures = () =>
    gh.logs.filter((l) => l.msg?.toString().startsWith("config reload failed"));
  const repeats = () =>
    gh.logs.filter(
      (l) => l.msg === "the files read are those of the last failed reload; not reported again",
    );

  const typo = `${good}limits:\n  stroe: memory\n`;
  await replace(gh.configPath, typo);
  t.ok(await eventually(async () => (await reloads(gh, "failure")) === 1, DEADLINE_MS));
  for (let again = 1; again <= 3; again++) {
    await replace(gh.configPath, typo);
    t.ok(
      await eventually(async () => repeats().length === again, DEADLINE_MS),
      `the same content written again (${again}) is read and not reported`,
    );
  }
  t.equal(failures().length, 1, "one error line");
  t.equal(await reloads(gh, "failure"), 1, "one failure counted");

  await replace(gh.configPath, `${good}limits:\n  store: memroy\n`);
  t.ok(
    await eventually(async () => (await reloads(gh, "failure")) === 2, DEADLINE_MS),
    "another bad content is counted again",
  );
  t.equal(failures().length, 2);
  t.match(failures()[1]?.problems, [/limits\.store: /]);

  await replace(gh.configPath, good);
  const restored = await gh.logged((l) => l.msg === "config restored");
  t.match(restored, { level: "info", trigger: "file change" });
  t.equal(await reloads(gh, "failure"), 2, "restoring is no failure");
  await replace(gh.configPath, typo);
  t.ok(
    await eventually(async () => (await reloads(gh, "failure")) === 3, DEADLINE_MS),
    "after the restoration, the first bad content is counted again",
  );
});

t.test("a listen change is applied but for the address, which needs a restart", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-listen-"));
  const [port, asked] = [await refusingPort(), await refusingPort()];
  const configPath = join(dir, "proxy.config.yaml");
  const yaml = (listen: number, extra = "") =>
    `listen: 127.0.0.1:${listen}\nadmin_listen: 127.0.0.1:0\n${configFor(upstream.url, ROUTES)}${extra}`;
  await writeFile(configPath, yaml(port));
  const cli = await startCli(["--config", configPath]);
  t.teardown(async () => {
    if (cli.child.exitCode === null) await cli.stop("SIGTERM");
    await rm(dir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${port}`;
  t.equal((await send(`${url}/v1/open`)).status, 404);

  await replace(
    configPath,
    yaml(asked, "  - path: /v1/open\n    methods: [GET]\n    auth: none\n"),
  );
  const warning = await cli.line((l) => l.msg?.toString().startsWith("listen stays") === true);
  t.match(warning, {
    level: "warn",
    key: "listen",
    inForce: `127.0.0.1:${port}`,
    asked: `127.0.0.1:${asked}`,
    msg: `listen stays 127.0.0.1:${port} until a restart (the file asks for 127.0.0.1:${asked}); the rest of the change is applied`,
  });
  await cli.line((l) => l.msg === "config reloaded");
  t.equal((await send(`${url}/v1/open`)).status, 200, "the old address serves the new route");
  await t.rejects(send(`http://127.0.0.1:${asked}/v1/open`), "nothing listens on the new one");
  const shown = JSON.parse((await send(`${cli.adminUrl}/config`)).body.toString("utf8")) as {
    listen: string;
    routes: unknown[];
  };
  t.equal(shown.listen, `127.0.0.1:${port}`, "/config shows the address in force");
  t.equal(shown.routes.length, 2, "and the rest of the file");
  t.equal(await cli.stop("SIGTERM"), 0);
});

t.test("the Redis CA file's content is part of the configuration's identity", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-ca-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const configPath = join(dir, "proxy.config.yaml");
  const ca = join(dir, "ca.pem");
  await writeFile(
    configPath,
    configFor(
      upstream.url,
      "limits:\n  store: redis\n  redis:\n    url: rediss://127.0.0.1:6380\n    tls:\n      ca_file: ./ca.pem\n",
    ),
  );
  const { publicPem } = await pemPair();
  await writeFile(ca, publicPem);
  const before = await loadSnapshot(configPath, { env: {} });
  t.equal(before.files.get(ca), fileHash(publicPem), "the CA file is one of the files read");
  await writeFile(ca, (await pemPair()).publicPem);
  const after = await loadSnapshot(configPath, { env: {} });
  t.equal(after.hash, before.hash, "the config file is the same");
  t.not(after.identity, before.identity, "the configuration is not");
  await writeFile(ca, "");
  await t.rejects(loadSnapshot(configPath, { env: {} }), {
    message: /limits\.redis\.tls\.ca_file: "\.\/ca\.pem" is empty/,
  });
});
