/**
 * Config reload (docs/operations.md, Reload): an in-place write, a rename over the file, a
 * Kubernetes ConfigMap symlink swap and SIGHUP each swap the snapshot; a bad file changes nothing.
 * Changes are awaited by polling with a deadline, never by asserting how long they took.
 */
import { link, mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Writable } from "node:stream";
import { join } from "node:path";
import { exportPKCS8, generateKeyPair } from "jose";
import { pino } from "pino";
import t from "tap";
import { loadSnapshot } from "../src/config/snapshot.js";
import { startGatehouse, type Gatehouse } from "../src/server.js";
import { startCli } from "./helpers/cli.js";
import { eventually, send } from "./helpers/client.js";
import { memoryLogger, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";
import { metric, scrape, type Scraped } from "./helpers/metrics.js";

// A reload lands within about 150 ms (docs/operations.md, Reload); the deadline leaves room for a
// loaded CI machine.
const DEADLINE_MS = 30_000;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/** A config allowing GET on each of `paths`. */
function config(paths: readonly string[], extra = ""): string {
  const routes = paths.map((p) => `  - path: ${p}\n    methods: [GET]\n    auth: none\n`).join("");
  return `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstream.url}
  timeout: 2s
shutdown:
  grace: 2s
routes:
${routes}${extra}`;
}

async function status(url: string): Promise<number> {
  return (await send(url)).status;
}

/** Polls until GET `url` answers `expected`. */
function becomes(url: string, expected: number): Promise<boolean> {
  return eventually(async () => (await status(url)) === expected, DEADLINE_MS);
}

async function reloadCount(from: Scraped, result: string): Promise<number> {
  return (await metric(from, "gatehouse_config_reloads_total", { result })) || 0;
}

t.test("an in-place write is picked up by the watcher", async (t) => {
  const gh = await startTestGatehouse(config(["/v1/a"]), { watch: true });
  t.teardown(() => gh.close());
  t.equal(await status(`${gh.url}/v1/b`), 404);
  await gh.writeConfig(config(["/v1/a", "/v1/b"]));
  t.ok(await becomes(`${gh.url}/v1/b`, 200), "the new route is served");
  t.equal(await status(`${gh.url}/v1/a`), 200, "the old one too");
  t.match(
    gh.logs.find((l) => l.msg === "config reloaded"),
    { trigger: "file change", hash: gh.gatehouse.config().hash },
  );
  await gh.writeConfig(config(["/v1/b"]));
  t.ok(await becomes(`${gh.url}/v1/a`, 404), "a removed route stops being served");
});

t.test("a rename over the file is picked up by the watcher", async (t) => {
  const gh = await startTestGatehouse(config(["/v1/a"]), { watch: true });
  t.teardown(() => gh.close());
  const temporary = join(gh.dir, ".proxy.config.yaml.swp");
  await writeFile(temporary, config(["/v1/a", "/v1/renamed"]));
  await rename(temporary, gh.configPath);
  t.ok(await becomes(`${gh.url}/v1/renamed`, 200));
  // A second rename: the watcher survived the first one.
  await writeFile(temporary, config(["/v1/again"]));
  await rename(temporary, gh.configPath);
  t.ok(await becomes(`${gh.url}/v1/again`, 200));
  t.equal(await status(`${gh.url}/v1/a`), 404);
});

/** Starts gatehouse on `configPath` with the file watcher on, logging into memory. */
async function startWatching(
  configPath: string,
): Promise<{ gatehouse: Gatehouse; url: string; logs: Array<Record<string, unknown>> }> {
  const { log, logs } = memoryLogger();
  const gatehouse = await startGatehouse({ configPath, log, watch: true });
  return { gatehouse, url: `http://127.0.0.1:${gatehouse.address.port}`, logs };
}

t.test("a Kubernetes ConfigMap symlink swap is picked up by the watcher", async (t) => {
  // The kubelet's layout: proxy.config.yaml -> ..data/proxy.config.yaml, ..data -> ..<timestamp>;
  // an update writes a new timestamped folder, points ..data_tmp at it, renames it over ..data
  // and removes the old folder.
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-configmap-"));
  const publish = async (stamp: string, text: string, previous?: string): Promise<void> => {
    await mkdir(join(dir, stamp));
    await writeFile(join(dir, stamp, "proxy.config.yaml"), text);
    await symlink(stamp, join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
    if (previous !== undefined) await rm(join(dir, previous), { recursive: true });
  };
  await publish("..2026_01_01_00_00_00.000000001", config(["/v1/a"]));
  await symlink("..data/proxy.config.yaml", join(dir, "proxy.config.yaml"));
  const gh = await startWatching(join(dir, "proxy.config.yaml"));
  t.teardown(async () => {
    await gh.gatehouse.shutdown();
    await rm(dir, { recursive: true, force: true });
  });
  t.equal(await status(`${gh.url}/v1/a`), 200);
  t.equal(await status(`${gh.url}/v1/swapped`), 404);

  await publish(
    "..2026_01_01_00_01_00.000000002",
    config(["/v1/a", "/v1/swapped"]),
    "..2026_01_01_00_00_00.000000001",
  );
  t.ok(await becomes(`${gh.url}/v1/swapped`, 200), "the first swap is applied");

  await publish(
    "..2026_01_01_00_02_00.000000003",
    config(["/v1/second"]),
    "..2026_01_01_00_01_00.000000002",
  );
  t.ok(await becomes(`${gh.url}/v1/second`, 200), "a second swap is applied too");
  t.equal(await status(`${gh.url}/v1/a`), 404);
  t.equal(gh.logs.filter((l) => l.msg === "config reloaded").length >= 2, true);
});

t.test("a bad file changes nothing, is logged and counted; a good one recovers", async (t) => {
  const gh = await startTestGatehouse(config(["/v1/a"]), { watch: true });
  t.teardown(() => gh.close());
  const hash = gh.gatehouse.config().hash;

  await gh.writeConfig(`${config(["/v1/a"])}routes: [\n`);
  t.ok(
    await eventually(async () => (await reloadCount(gh, "failure")) >= 1, DEADLINE_MS),
    'gatehouse_config_reloads_total{result="failure"} counts it',
  );
  t.equal(gh.gatehouse.config().hash, hash, "the snapshot in force is the old one");
  t.equal(await status(`${gh.url}/v1/a`), 200, "the old routes keep working");
  t.equal(await status(`${gh.url}/readyz`), 200, "readiness stays up");
  const failure = gh.logs.find((l) => l.msg?.toString().startsWith("config reload failed"));
  t.equal(failure?.level, "error", "logged as an error");
  t.match(failure?.problems, [/proxy\.config\.yaml:\d+:\d+ /], "with file, line and column");

  const failuresBefore = await reloadCount(gh, "failure");
  await gh.writeConfig(config(["/v1/a"], "unknown_key: 1\n"));
  t.ok(
    await eventually(async () => (await reloadCount(gh, "failure")) > failuresBefore, DEADLINE_MS),
    "an invalid key fails the reload too",
  );
  t.equal(gh.gatehouse.config().hash, hash);

  await unlink(gh.configPath);
  t.equal(await gh.gatehouse.reload("test"), "failure", "a deleted file fails the reload");
  t.equal(await status(`${gh.url}/v1/a`), 200);

  await gh.writeConfig(config(["/v1/a", "/v1/fixed"]));
  t.ok(await becomes(`${gh.url}/v1/fixed`, 200), "the next good file is applied");
  t.ok((await reloadCount(gh, "success")) >= 1);
  t.not(gh.gatehouse.config().hash, hash);
});

t.test("a reload of the same bytes changes nothing", async (t) => {
  const gh = await startTestGatehouse(config(["/v1/a"]));
  t.teardown(() => gh.close());
  const before = gh.gatehouse.config();
  t.equal(await gh.gatehouse.reload("test"), "unchanged");
  t.equal(gh.gatehouse.config(), before, "the same snapshot object stays in force");
});

t.test("a request keeps the snapshot it started with", async (t) => {
  let release: (() => void) | undefined;
  const slow = await startUpstream((_req, res) => {
    release = () => res.end("old snapshot");
  });
  const gh = await startTestGatehouse(
    config(["/v1/a"]).replace(`url: ${upstream.url}`, `url: ${slow.url}`),
  );
  t.teardown(async () => {
    await gh.close();
    await slow.close();
  });
  const inFlight = send(`${gh.url}/v1/a`);
  t.ok(await eventually(async () => release !== undefined), "the request reached the upstream");
  await gh.writeConfig(config(["/v1/b"]));
  t.equal(await gh.gatehouse.reload("test"), "success");
  t.equal(await status(`${gh.url}/v1/a`), 404, "new requests see the new routes");
  release?.();
  const res = await inFlight;
  t.equal(res.status, 200, "the request in flight completes");
  t.equal(res.body.toString(), "old snapshot");
});

t.test("SIGHUP re-reads the file (the built CLI)", async (t) => {
  // The config is a hard link into another folder: inotify reports writes through the other
  // name to that folder only, so the watcher does not see them and only SIGHUP applies them.
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-sighup-"));
  await mkdir(join(dir, "conf"));
  await mkdir(join(dir, "real"));
  const real = join(dir, "real", "proxy.config.yaml");
  await writeFile(real, config(["/v1/a"]));
  await link(real, join(dir, "conf", "proxy.config.yaml"));
  const cli = await startCli(["--config", join(dir, "conf", "proxy.config.yaml")]);
  t.teardown(async () => {
    if (cli.child.exitCode === null) await cli.stop("SIGTERM");
    await rm(dir, { recursive: true, force: true });
  });
  t.equal(await status(`${cli.url}/v1/hup`), 404);

  await writeFile(real, config(["/v1/a", "/v1/hup"]));
  cli.child.kill("SIGHUP");
  t.ok(await becomes(`${cli.url}/v1/hup`, 200), "the new route is served after SIGHUP");
  t.match(
    cli.lines().find((l) => l.msg === "config reloaded"),
    { trigger: "SIGHUP" },
  );

  await writeFile(real, "routes: [\n");
  cli.child.kill("SIGHUP");
  t.ok(
    await eventually(async () => (await reloadCount(cli.adminUrl, "failure")) >= 1, DEADLINE_MS),
    "a bad file on SIGHUP is counted",
  );
  t.equal(await status(`${cli.url}/v1/hup`), 200, "and changes nothing");
  t.equal(cli.child.exitCode, null, "the process keeps running");
  t.equal(await cli.stop("SIGTERM"), 0);
});

t.test(
  "a write to the target of a config symlinked from another folder is picked up",
  async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-link-"));
    await mkdir(join(dir, "conf"));
    await mkdir(join(dir, "real"));
    const real = join(dir, "real", "proxy.config.yaml");
    await writeFile(real, config(["/v1/a"]));
    const configPath = join(dir, "conf", "proxy.config.yaml");
    await symlink(real, configPath);
    const { gatehouse, url } = await startWatching(configPath);
    t.teardown(async () => {
      await gatehouse.shutdown();
      await rm(dir, { recursive: true, force: true });
    });
    await writeFile(real, config(["/v1/a", "/v1/linked"]));
    t.ok(await becomes(`${url}/v1/linked`, 200), "the target's folder is watched too");
  },
);

t.test("a key file replaced under an unchanged config is a change", async (t) => {
  const pem = async () =>
    exportPKCS8((await generateKeyPair("EdDSA", { extractable: true })).privateKey);
  const signing = "tokens:\n  signing:\n    algorithm: EdDSA\n    key_file: ./signing.pem\n";
  const gh = await startTestGatehouse(config(["/v1/a"], signing), {
    watch: true,
    files: { "signing.pem": await pem() },
  });
  t.teardown(() => gh.close());
  const kid = async () =>
    (
      (await (await fetch(`${gh.url}/.well-known/jwks.json`)).json()) as {
        keys: Array<{ kid: string }>;
      }
    ).keys[0]?.kid;
  const before = await kid();
  t.type(before, "string");
  await writeFile(join(gh.dir, "signing.pem"), await pem());
  t.ok(
    await eventually(async () => (await kid()) !== before, DEADLINE_MS),
    "the new key signs and is published",
  );
  t.equal(await gh.gatehouse.reload("test"), "unchanged", "same bytes, same keys: unchanged");
});

t.test("gatehouse_config_info's hash is the sha256 of the file in force", async (t) => {
  const text = config(["/v1/a"]);
  const gh = await startTestGatehouse(text);
  t.teardown(() => gh.close());
  const info = async () =>
    /^gatehouse_config_info\{hash="([0-9a-f]+)"\} 1$/m.exec(await scrape(gh))?.[1];
  t.equal(await info(), createHash("sha256").update(text).digest("hex"));
  const next = config(["/v1/b"]);
  await gh.writeConfig(next);
  t.equal(await gh.gatehouse.reload("test"), "success");
  t.equal(await info(), createHash("sha256").update(next).digest("hex"), "and after a reload");
});

t.test(
  "any sequence of ConfigMap swaps, renames and in-place writes ends with the last content in force",
  async (t) => {
    // Each step writes a config serving one more path; whatever the gaps between steps (none,
    // around the reload's debounce, after it), the last content must end up in force.
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-sequence-"));
    let stamp = 0;
    let current = "";
    const swap = async (text: string): Promise<void> => {
      const next = `..2026_01_01_00_00_00.${String(++stamp).padStart(9, "0")}`;
      await mkdir(join(dir, next));
      await writeFile(join(dir, next, "proxy.config.yaml"), text);
      await symlink(next, join(dir, "..data_tmp"));
      await rename(join(dir, "..data_tmp"), join(dir, "..data"));
      if (current !== "") await rm(join(dir, current), { recursive: true });
      current = next;
    };
    // The old folder left in place: its watcher reports nothing more.
    const swapKeeping = async (text: string): Promise<void> => {
      current = "";
      await swap(text);
    };
    const inPlace = (text: string) => writeFile(join(dir, "..data", "proxy.config.yaml"), text);
    const renamed = async (text: string): Promise<void> => {
      const temporary = join(dir, "..data", ".proxy.config.yaml.swp");
      await writeFile(temporary, text);
      await rename(temporary, join(dir, "..data", "proxy.config.yaml"));
    };
    await swap(config(["/v1/start"]));
    await symlink("..data/proxy.config.yaml", join(dir, "proxy.config.yaml"));
    const gh = await startWatching(join(dir, "proxy.config.yaml"));
    t.teardown(async () => {
      await gh.gatehouse.shutdown();
      await rm(dir, { recursive: true, force: true });
    });
    const steps = { swap, swapKeeping, inPlace, renamed };
    const sequences: Array<Array<[keyof typeof steps, number]>> = [
      [
        ["swap", 0],
        ["inPlace", 0],
      ],
      [
        ["swap", 0],
        ["inPlace", 150],
      ],
      [
        ["swap", 0],
        ["inPlace", 200],
      ],
      [
        ["swap", 0],
        ["inPlace", 250],
      ],
      [
        ["swap", 0],
        ["renamed", 200],
      ],
      [
        ["renamed", 0],
        ["swap", 180],
        ["inPlace", 190],
      ],
      [
        ["inPlace", 0],
        ["swap", 0],
        ["inPlace", 220],
        ["swap", 0],
      ],
      [
        ["swap", 0],
        ["swap", 160],
        ["inPlace", 170],
        ["renamed", 10],
      ],
    ];
    let written = 0;
    for (const [index, sequence] of sequences.entries()) {
      let last = "";
      for (const [kind, gapMs] of sequence) {
        await new Promise((done) => setTimeout(done, gapMs));
        last = `/v1/written-${++written}`;
        await steps[kind](config(["/v1/start", last]));
      }
      t.ok(await becomes(`${gh.url}${last}`, 200), `sequence ${index}: ${last} is in force`);
    }
  },
);

t.test(
  "an edit landing after a swap's reload read the file, before the watchers follow, is applied",
  async (t) => {
    // The edit is made from the log line that ends the swap's reload: the file has been read and
    // the watchers are still on the old folder, so no event reports it; the store must look again.
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-race-"));
    await mkdir(join(dir, "..1"));
    await writeFile(join(dir, "..1", "proxy.config.yaml"), config(["/v1/start"]));
    await symlink("..1", join(dir, "..data"));
    await symlink("..data/proxy.config.yaml", join(dir, "proxy.config.yaml"));
    let edit: (() => void) | undefined;
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        if (chunk.toString("utf8").includes('"msg":"config reloaded"')) {
          edit?.();
          edit = undefined;
        }
        done();
      },
    });
    const gatehouse = await startGatehouse({
      configPath: join(dir, "proxy.config.yaml"),
      log: pino({ level: "info" }, sink),
      watch: true,
    });
    const url = `http://127.0.0.1:${gatehouse.address.port}`;
    t.teardown(async () => {
      await gatehouse.shutdown();
      await rm(dir, { recursive: true, force: true });
    });
    edit = () => writeFileSync(join(dir, "..2", "proxy.config.yaml"), config(["/v1/edited"]));
    await mkdir(join(dir, "..2"));
    await writeFile(join(dir, "..2", "proxy.config.yaml"), config(["/v1/swapped"]));
    await symlink("..2", join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
    t.ok(await becomes(`${url}/v1/edited`, 200), "the edit is in force");
    t.equal(edit, undefined, "the edit was made when the swap's reload ended");
  },
);

t.test("a large file is parsed off the main thread with the same result and errors", async (t) => {
  // 2,000 routes are well over the size parsed at once: the reload goes through the worker.
  const many = Array.from({ length: 2000 }, (_, i) => `/v1/many/${i}`);
  const env = { ...process.env, SHORT_CLIENT_SECRET: "x".repeat(31) };
  const gh = await startTestGatehouse(config(["/v1/a"]), { env });
  t.teardown(() => gh.close());
  // With a warning, which the worker places in the file as it reads it.
  const client = "clients:\n  - id: short\n    secret_env: SHORT_CLIENT_SECRET\n";
  const text = config(["/v1/a", ...many], client);
  await gh.writeConfig(text);
  t.equal(await gh.gatehouse.reload("test"), "success");
  t.equal(gh.gatehouse.config().routes.routes.length, 2001);
  t.equal(await status(`${gh.url}/v1/many/1999`), 200);
  // The worker sends the routes back in slices of JSON text: they arrive whole and in order.
  const read = await loadSnapshot(gh.configPath, { env });
  t.strictSame(gh.gatehouse.config().file, read.file, "what a start reads, route for route");
  t.strictSame(gh.gatehouse.config().warnings, read.warnings, "and its warning, at its line");
  const line = text.split("\n").findIndex((l) => l.includes("secret_env")) + 1;
  t.match(read.warnings, [{ line, col: 17, message: /^clients\[0\]\.secret_env: names/ }]);

  const hash = gh.gatehouse.config().hash;
  await gh.writeConfig(config(["/v1/a", ...many, "/v1/../bad"], "unknown_key: 1\n"));
  t.equal(await gh.gatehouse.reload("test"), "failure");
  t.equal(gh.gatehouse.config().hash, hash, "the config in force stays");
  const failure = gh.logs.findLast((l) => l.msg?.toString().startsWith("config reload failed"));
  t.match(failure?.problems, [
    /proxy\.config\.yaml:\d+:11 routes\[2001\]\.path: must not contain "\." or "\.\." segments$/,
    /proxy\.config\.yaml:\d+:1 unknown_key: unknown key/,
  ]);
});
