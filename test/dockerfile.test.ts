import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { startCli } from "./helpers/cli.js";

// No Docker engine runs here, so the image is checked for what can be checked without one: every
// file the Dockerfile copies from the repository exists, and its command starts gatehouse from a
// clean production install laid out as the image lays it out.
const dockerfile = await readFile("Dockerfile", "utf8");
const instructions = dockerfile
  .split("\n")
  .filter((line) => line.trim() !== "" && !line.startsWith("#"))
  .map((line) => line.trim().split(/\s+/));

t.test("every file copied from the build context exists", async (t) => {
  const copies = instructions.filter(
    ([op, ...args]) => op === "COPY" && !args[0]?.startsWith("--from"),
  );
  t.ok(copies.length >= 3);
  for (const [, ...args] of copies) {
    for (const source of args.slice(0, -1)) t.ok(existsSync(source), `${source} exists`);
  }
});

t.test("the build stage runs a script package.json defines", async (t) => {
  const scripts = (
    JSON.parse(await readFile("package.json", "utf8")) as { scripts: Record<string, string> }
  ).scripts;
  const runs = instructions.filter(([op]) => op === "RUN").map((words) => words.slice(1).join(" "));
  t.ok(runs.includes("npm run build"));
  t.type(scripts.build, "string");
});

t.test("the image's command starts gatehouse from a clean production install", async (t) => {
  const app = await mkdtemp(join(tmpdir(), "gatehouse-image-"));
  await cp("package.json", join(app, "package.json"));
  await cp("package-lock.json", join(app, "package-lock.json"));
  execFileSync(
    "npm",
    ["ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"],
    { cwd: app, stdio: "ignore" },
  );
  await cp("dist/src", join(app, "dist/src"), { recursive: true });
  // The image's config, on ports free on this machine.
  const config = (await readFile("proxy.config.yaml", "utf8"))
    .replace(/^listen: \S+/m, "listen: 127.0.0.1:0")
    .replace(/^admin_listen: \S+/m, "admin_listen: 127.0.0.1:0");
  await writeFile(join(app, "proxy.config.yaml"), config);
  await cp("config.schema.json", join(app, "config.schema.json"));

  const entrypoint = JSON.parse(/^ENTRYPOINT (.*)$/m.exec(dockerfile)?.[1] ?? "[]") as string[];
  const command = JSON.parse(/^CMD (.*)$/m.exec(dockerfile)?.[1] ?? "[]") as string[];
  t.equal(entrypoint[0], "node");
  const args = [...entrypoint.slice(2), ...command].map((arg) =>
    arg.replace(/^\/app\//, `${app}/`),
  );
  t.equal(entrypoint[1], "dist/src/cli.js");
  const cli = await startCli(args, {}, app, join(app, entrypoint[1] as string));
  const health = await fetch(`${cli.url}/healthz`);
  t.equal(health.status, 200);
  t.equal(await cli.stop("SIGTERM"), 0);
});
