/** `npx gatehouse` and `npm start`, run as a user of a clone runs them. */
import { spawn, spawnSync } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

// npm itself takes seconds to start on a loaded machine, and this file starts it three times.
t.setTimeout(240_000);
const dir = await mkdtemp(join(tmpdir(), "gatehouse-cli-start-"));

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
