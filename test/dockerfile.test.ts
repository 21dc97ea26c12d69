import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, lstatSync, readdirSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import dockerignore from "@balena/dockerignore";
import t from "tap";
import { parseConfigText } from "../src/config/load.js";
import { startCli } from "./helpers/cli.js";
import { startUpstream } from "./helpers/upstream.js";

// No Docker engine runs here, so the image is checked for what can be checked without one: what
// the build context holds, the instructions' form, and the image's command and health check run
// from a clean production install laid out as the image lays it out.
// A clean install of the production dependencies takes most of this file's time: on a loaded
// machine, more than the suite's 120 s per file.
t.setTimeout(300_000);
const dockerfile = await readFile("Dockerfile", "utf8");
// Instructions with their continuation lines joined, comments left out.
const instructions = dockerfile
  .replace(/\\\n\s*/g, "")
  .split("\n")
  .filter((line) => line.trim() !== "" && !line.startsWith("#"))
  .map((line) => {
    const [op = "", ...rest] = line.trim().split(/\s+/);
    return { op, args: rest, text: line.trim().slice(op.length).trim() };
  });
const finalStage = instructions.slice(instructions.findLastIndex(({ op }) => op === "FROM"));
// A CommonJS module that also exports itself as `default`, which is what its types describe.
const context = dockerignore.default().add(await readFile(".dockerignore", "utf8"));

t.test("every image is pinned to a Node 24 release", async (t) => {
  const bases = instructions.filter(({ op }) => op === "FROM").map(({ args }) => args[0]);
  t.equal(bases.length, 2);
  for (const base of bases) t.match(base, /^node:24\.\d+\.\d+(-[a-z]+)?(@sha256:[0-9a-f]{64})?$/);
});

t.test("the image runs as a numeric user other than root", async (t) => {
  const users = finalStage.filter(({ op }) => op === "USER").map(({ args }) => args[0] ?? "");
  t.equal(users.length, 1);
  t.match(users[0], /^\d+(:\d+)?$/);
  t.not(Number(users[0]?.split(":")[0]), 0);
});

t.test("every file copied from the build context exists and is in the context", async (t) => {
  const copies = instructions.filter(
    ({ op, args }) => op === "COPY" && !args[0]?.startsWith("--from"),
  );
  t.ok(copies.length >= 3);
  for (const { args } of copies) {
    for (const source of args.slice(0, -1)) {
      t.ok(existsSync(source), `${source} exists`);
      const sample = lstatSync(source).isDirectory() ? `${source}/x.ts` : source;
      t.notOk(context.ignores(sample), `${source} is sent to the builder`);
    }
  }
});

t.test("the docker run line says listen must be 0.0.0.0 in a container", async (t) => {
  const comments = dockerfile
    .split("\n")
    .filter((line) => line.startsWith("#"))
    .map((line) => line.slice(1).trim())
    .join(" ");
  const run = /docker run (.*?) gatehouse:local/.exec(comments)?.[1] ?? "";
  const { file } = parseConfigText("upstream:\n  url: http://127.0.0.1:3000\n", "default.yaml");
  const port = file.listen.split(":")[1];
  t.match(run, `-p ${port}:${port}`, "it publishes the default listen port");
  t.match(comments, /listen must be 0\.0\.0\.0 in a container, whose 127\.0\.0\.1 is its own/);
  t.match(comments, `\`listen: ${file.listen}\` (the default)`, "it names the default");
  t.equal(file.listen, "0.0.0.0:8080");
});

// The files docker sends to the builder, by walking the folders .dockerignore lets through.
function contextFiles(dir = ""): Array<{ path: string; bytes: number }> {
  return readdirSync(dir === "" ? "." : dir).flatMap((name) => {
    const path = dir === "" ? name : `${dir}/${name}`;
    const stat = lstatSync(path);
    if (stat.isDirectory()) return contextFiles(path);
    return context.ignores(path) ? [] : [{ path, bytes: stat.size }];
  });
}

t.test(".dockerignore keeps the heavy and private folders out of the build context", async (t) => {
  for (const path of [
    "node_modules/pino/package.json",
    ".git",
    ".git/HEAD",
    "dist/src/cli.js",
    "test/dockerfile.test.ts",
    "coverage/index.html",
    ".tap/report.json",
    "keys/signing.pem",
    "bench/run.ts",
    "deploy/kubernetes.yaml",
  ]) {
    t.ok(context.ignores(path), `${path} is left out`);
  }
  const top = readdirSync(".").filter(
    (name) => !["node_modules", ".git", "dist", "test", "coverage", ".tap"].includes(name),
  );
  const files = top.flatMap((name) =>
    lstatSync(name).isDirectory()
      ? contextFiles(name)
      : contextFiles("").filter((f) => f.path === name),
  );
  const bytes = files.reduce((sum, file) => sum + file.bytes, 0);
  t.ok(bytes < 2_000_000, `the context is ${bytes} bytes`);
  t.ok(files.some((file) => file.path === "src/cli.ts"));
});

// The final stage's environment, with the image's folders mapped to folders of this machine.
function imageEnv(map: (path: string) => string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { text } of finalStage.filter(({ op }) => op === "ENV")) {
    for (const [, name, value] of text.matchAll(/(\w+)=(\S+)/g))
      env[name as string] = map(value as string);
  }
  return env;
}

t.test(
  "the image's command starts gatehouse from a clean install, never the demo config",
  async (t) => {
    const root = await mkdtemp(join(tmpdir(), "gatehouse-image-"));
    const app = join(root, "app");
    const etc = join(root, "etc-gatehouse");
    await mkdir(etc);
    const map = (path: string) =>
      path.replace(/^\/app(?=\/|$)/, app).replace(/^\/etc\/gatehouse(?=\/|$)/, etc);
    await mkdir(app);
    await cp("package.json", join(app, "package.json"));
    await cp("package-lock.json", join(app, "package-lock.json"));
    execFileSync(
      "npm",
      ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"],
      { cwd: app, stdio: "ignore" },
    );
    await cp("dist/src", join(app, "dist/src"), { recursive: true });
    await cp("proxy.config.yaml", join(app, "proxy.config.yaml"));
    await cp("config.schema.json", join(app, "config.schema.json"));
    const env = { ...imageEnv(map), GATEHOUSE_ADMIN_URL: "" };
    // The build's own RUN lines after the install (the compile cache's warm-up) must succeed.
    for (const { text } of finalStage.filter(
      ({ op, text }) => op === "RUN" && text.startsWith("node "),
    )) {
      const [, ...args] = text.split(/\s+/);
      const run = spawnSync(process.execPath, args, { cwd: app, env: { ...process.env, ...env } });
      t.equal(run.status, 0, text);
    }

    const entrypoint = JSON.parse(/^ENTRYPOINT (.*)$/m.exec(dockerfile)?.[1] ?? "[]") as string[];
    const command = JSON.parse(/^CMD (.*)$/m.exec(dockerfile)?.[1] ?? "[]") as string[];
    t.equal(entrypoint[0], "node");
    const cli = join(app, entrypoint[1] as string);
    const args = [...entrypoint.slice(2), ...command].map(map);
    const bare = spawnSync(process.execPath, [cli, ...args], {
      cwd: app,
      encoding: "utf8",
      env: { ...process.env, ...env },
    });
    t.equal(bare.status, 1, "nothing mounted: no config, no proxy");
    t.equal(
      bare.stderr,
      `${etc}/proxy.config.yaml:1:1 cannot be read (ENOENT); name the configuration file with --config FILE or $GATEHOUSE_CONFIG\n`,
    );

    const upstream = await startUpstream();
    t.teardown(() => upstream.close());
    await writeFile(
      join(etc, "proxy.config.yaml"),
      `listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstream:\n  url: ${upstream.url}\n`,
    );
    const served = await startCli(args, env, app, cli);
    t.equal((await fetch(`${served.url}/healthz`)).status, 200);

    // The health check, aimed at this process's admin port: 0 while it serves, 1 once it is gone.
    const healthcheck = /^HEALTHCHECK .*CMD (\[.*\])$/m.exec(
      dockerfile.replace(/\\\n\s*/g, ""),
    )?.[1];
    const probe = (JSON.parse(healthcheck ?? "[]") as string[]).map((arg) =>
      arg.replace("127.0.0.1:9901", new URL(served.adminUrl).host),
    );
    t.equal(probe[0], "node", "no binary but node");
    t.equal(spawnSync(process.execPath, probe.slice(1)).status, 0, "healthy while serving");
    t.equal(await served.stop("SIGTERM"), 0);
    t.equal(spawnSync(process.execPath, probe.slice(1)).status, 1, "unhealthy once stopped");
  },
);
