/** The command README gives for a clone, and `npm start`, run as a user of a clone runs them. */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import t from "tap";
import { startUpstream } from "./helpers/upstream.js";

// The CLI is tested by running the built command (`npm test` builds before tap runs).
const CLI = "dist/src/cli.js";
const { version } = JSON.parse(await readFile("package.json", "utf8")) as { version: string };

function gatehouse(args: string[], input = "", env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], {
    encoding: "utf8",
    input,
    env: { ...process.env, GATEHOUSE_CONFIG: "", ...env },
  });
}

// npm itself takes seconds to start on a loaded machine, and this file starts it twice.
t.setTimeout(240_000);
const dir = await mkdtemp(join(tmpdir(), "gatehouse-cli-start-"));

t.test("the command README gives for a clone runs this clone's build", async (t) => {
  const readme = await readFile("README.md", "utf8");
  const command = /^- From a clone, after `npm ci && npm run build`: `(.+) check`/m.exec(
    readme,
  )?.[1];
  t.equal(command, `node ${CLI}`);
  // Through a shell, as typed, with this test's Node first on the PATH.
  const result = spawnSync("sh", ["-c", `${command} version`], {
    encoding: "utf8",
    env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` },
  });
  t.equal(result.status, 0, result.stderr);
  t.equal(result.stdout, `${version}\n`);
});

// npx may run a stale cache entry instead of the clone's build, and outside the clone it fetches
// an unrelated package that holds the name.
t.test("README, docs/ and deploy/ never send users to npx gatehouse", async (t) => {
  const files = [
    "README.md",
    ...["docs", "deploy"]
      .filter((dir) => existsSync(dir))
      .flatMap((dir) =>
        readdirSync(dir, { recursive: true, encoding: "utf8" }).map((name) => join(dir, name)),
      )
      .filter((path) => statSync(path).isFile()),
  ];
  t.ok(files.includes("deploy/kubernetes.yaml"), "the examples are read");
  for (const path of files) t.notMatch(readFileSync(path, "utf8"), /npx +gatehouse/, path);
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
  t.match(
    missing.output,
    /absent\.yaml:1:1 cannot be read \(ENOENT\); name the configuration file with --config FILE or \$GATEHOUSE_CONFIG\n/,
  );
  const scripts = (
    JSON.parse(await readFile("package.json", "utf8")) as {
      scripts: Record<string, string>;
    }
  ).scripts;
  t.notMatch(scripts.start, /--config|-c /, "the script leaves the choice to the command");
  const fallback = gatehouse(["check"], "", { GATEHOUSE_CONFIG: "" });
  t.match(fallback.stdout, /^proxy\.config\.yaml: ok/, "unset or empty: proxy.config.yaml");
});
