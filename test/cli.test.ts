import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { configJsonSchema } from "../src/config/json-schema.js";
import { startUpstream } from "./helpers/upstream.js";
import { startCli } from "./helpers/cli.js";
import { scrape } from "./helpers/metrics.js";

// The CLI is tested by running the built command (`npm test` builds before tap runs).
const CLI = "dist/src/cli.js";

function gatehouse(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    env: { ...process.env, GATEHOUSE_CONFIG: "", ...env },
  });
}

t.test("check accepts the documented example and prints a one-line summary", async (t) => {
  const result = gatehouse(["check", "--config", "proxy.config.yaml"]);
  t.equal(result.status, 0);
  t.match(
    result.stdout,
    /^proxy\.config\.yaml: ok \(5 routes, \d+ clients?, 2 plans; upstream http:\/\/127\.0\.0\.1:3000\/\)\n$/,
  );
  t.equal(result.stderr, "");
});

t.test(
  "check prints every error as FILE:LINE:COL message, the file as given, and exits 1",
  async (t) => {
    const result = gatehouse(["check", "--config", "test/fixtures/config/many-errors.yaml"]);
    t.equal(result.status, 1);
    t.equal(result.stdout, "");
    const lines = result.stderr.trimEnd().split("\n");
    t.equal(lines.length, 4);
    for (const line of lines)
      t.match(line, /^test\/fixtures\/config\/many-errors\.yaml:\d+:\d+ \S/);
  },
);

t.test(
  "check reports schema, cross-reference and environment problems of a file in one run",
  async (t) => {
    const result = gatehouse(["check", "--config", "test/fixtures/config/every-kind.yaml"]);
    t.equal(result.status, 1);
    const found = result.stderr
      .trimEnd()
      .split("\n")
      .map(
        (line) => /^test\/fixtures\/config\/every-kind\.yaml:\d+:\d+ ([\w.[\]]+):/.exec(line)?.[1],
      );
    t.strictSame(found, [
      "upstream.timeout",
      "tokens.signing.key_file",
      "clients[0].secret_env",
      "clients[0].plan",
      "routes[0].cost",
    ]);
  },
);

t.test("check reads $GATEHOUSE_CONFIG when --config is absent", async (t) => {
  const result = gatehouse(["check"], {
    GATEHOUSE_CONFIG: "test/fixtures/config/unknown-key.yaml",
  });
  t.equal(result.status, 1);
  t.match(
    result.stderr,
    /^test\/fixtures\/config\/unknown-key\.yaml:3:3 upstream\.timout: unknown key/,
  );
});

t.test("check on a missing file says it cannot be read, and how to name another", async (t) => {
  const result = gatehouse(["check", "--config", "no/such/file.yaml"]);
  t.equal(result.status, 1);
  t.equal(
    result.stderr,
    "no/such/file.yaml:1:1 cannot be read (ENOENT); name the configuration file with --config FILE or $GATEHOUSE_CONFIG\n",
  );
});

t.test("usage errors exit 2; --help exits 0", async (t) => {
  t.equal(gatehouse(["frobnicate"]).status, 2);
  t.match(gatehouse(["frobnicate"]).stderr, /unknown command "frobnicate"/);
  t.equal(gatehouse(["--bogus"]).status, 2);
  const help = gatehouse(["--help"]);
  t.equal(help.status, 0);
  t.match(help.stdout, /gatehouse check \[--config FILE\]/);
});

t.test("running with an invalid file prints every error and exits 1 without serving", async (t) => {
  const file = "test/fixtures/config/route-methods-overlap.yaml";
  const result = gatehouse(["--config", file]);
  t.equal(result.status, 1);
  t.equal(
    result.stderr,
    `${file}:9:14 routes[2].methods: POST, GET are also in routes[0] of the same path; list each of a path's methods in one entry only\n` +
      `${file}:13:14 routes[4].methods: PUT is also in routes[2] of the same path; list each of a path's methods in one entry only\n`,
  );
});

t.test("run serves, answers /healthz, and exits 0 on SIGTERM", async (t) => {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-cli-"));
  const config = join(dir, "gatehouse.yaml");
  await writeFile(
    config,
    `listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstream:\n  url: ${upstream.url}\nroutes:\n  - path: /status\n    methods: [GET]\n    auth: none\n`,
  );
  const cli = await startCli(["--config", config]);
  const health = await fetch(`${cli.url}/healthz`);
  t.equal(health.status, 200);
  const status = await fetch(`${cli.url}/status`);
  t.equal(status.status, 200);
  t.equal(upstream.received.length, 1);
  t.match(await scrape(cli.adminUrl), /gatehouse_requests_total\{route="\/status",status="200"/);
  t.equal(await cli.stop("SIGTERM"), 0);
  t.ok(
    cli
      .lines()
      .some((line) => line.msg === "request" && line.route === "/status" && line.status === 200),
    "one JSON access-log line per request",
  );
});

t.test("config.schema.json is the schema generated from the code", async (t) => {
  t.equal(
    await readFile("config.schema.json", "utf8"),
    configJsonSchema(),
    "run `npm run schema` to refresh it",
  );
});

t.test("the example config references the JSON Schema for editors", async (t) => {
  const text = await readFile("proxy.config.yaml", "utf8");
  t.match(text, /^# yaml-language-server: \$schema=\.\/config\.schema\.json$/m);
});

t.test("a second signal during the drain exits at once with 1", async (t) => {
  let held: () => void = () => undefined;
  const arrived = new Promise<void>((done) => (held = done));
  const upstream = await startUpstream(() => held());
  t.teardown(() => upstream.close());
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-cli-"));
  const config = join(dir, "gatehouse.yaml");
  await writeFile(
    config,
    `listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstream:\n  url: ${upstream.url}\nroutes:\n  - path: /slow\n    methods: [GET]\n    auth: none\nshutdown:\n  grace: 60s\n`,
  );
  const cli = await startCli(["--config", config]);
  let settled = false;
  const pending = fetch(`${cli.url}/slow`)
    .catch((error: unknown) => error)
    .finally(() => (settled = true));
  // The request is in flight once the upstream holds it; the drain has begun once it is logged.
  await arrived;
  cli.child.kill("SIGTERM");
  const draining = await cli.line((line) => line.msg === "draining");
  t.equal(draining.inFlight, 1, "the drain waits for the request the upstream holds");
  t.equal(cli.child.exitCode, null, "the first signal alone did not end the process");
  t.notOk(settled, "nor the request");
  t.equal(await cli.stop("SIGINT"), 1);
  t.ok((await pending) instanceof Error, "the in-flight request was cut off");
});
