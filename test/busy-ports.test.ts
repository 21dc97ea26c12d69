/**
 * A port another process holds, met by `gatehouse run` and by the demo: one line naming the
 * setting to change, exit 1, never a stack trace. The ports are really held, by listeners here.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import { runCli } from "./helpers/cli.js";
import { refusingPort } from "./helpers/ports.js";

const dir = await mkdtemp(join(tmpdir(), "gatehouse-busy-"));
const held: Server[] = [];
t.teardown(async () => {
  for (const server of held) server.close();
  await rm(dir, { recursive: true, force: true });
});

// A port held by a listener of this process for the rest of the file.
async function holdPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  held.push(server);
  return (server.address() as AddressInfo).port;
}

async function configFile(name: string, text: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, text);
  return path;
}

// What a user sees: exactly one line, and nothing of Node's own error printing.
function assertOneLine(t: Test, stderr: string, pattern: RegExp): void {
  t.equal(stderr.split("\n").length, 2, `one line: ${stderr}`);
  t.match(stderr, pattern);
  t.notMatch(stderr, /\n\s+at |Error:|node:internal/, "no stack trace");
}

t.test("run: a busy listen port names listen and the file", async (t) => {
  const busy = await holdPort();
  const config = await configFile(
    "listen.yaml",
    `listen: 127.0.0.1:${busy}\nadmin_listen: 127.0.0.1:0\nupstream:\n  url: http://127.0.0.1:${await refusingPort()}\n`,
  );
  const result = await runCli(["run", "--config", config], { GATEHOUSE_CONFIG: "" });
  t.equal(result.status, 1);
  assertOneLine(
    t,
    result.stderr,
    new RegExp(
      `^gatehouse: cannot start: 127\\.0\\.0\\.1:${busy} \\(listen\\) is already in use by another process: stop it, or set listen in ${config} to a free port\\n$`,
    ),
  );
});

t.test("run: a busy admin port names admin_listen", async (t) => {
  const busy = await holdPort();
  const config = await configFile(
    "admin.yaml",
    `listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:${busy}\nupstream:\n  url: http://127.0.0.1:${await refusingPort()}\n`,
  );
  const result = await runCli(["run", "--config", config], { GATEHOUSE_CONFIG: "" });
  t.equal(result.status, 1);
  assertOneLine(t, result.stderr, /\(admin_listen\) is already in use.*set admin_listen in /);
});

// `npm run demo` is the build and then this script; the build is the test suite's own.
function demo(config: string): Promise<{ status: number | null; stderr: string }> {
  const child = spawn(process.execPath, ["dist/src/demo.js"], {
    env: { ...process.env, GATEHOUSE_CONFIG: config },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  return new Promise((done) => child.once("close", (status) => done({ status, stderr })));
}

// The example file, with this machine's free ports where it names fixed ones.
async function exampleWith(listen: string, upstream: string): Promise<string> {
  const example = await readFile("proxy.config.yaml", "utf8");
  return example
    .replace(/^listen: \S+/m, `listen: ${listen}`)
    .replace(/^admin_listen: \S+/m, "admin_listen: 127.0.0.1:0")
    .replace(/^ {2}url: \S+/m, `  url: ${upstream}`)
    .replace(/^logging:\n {2}level: info/m, "logging:\n  level: warn");
}

t.test("demo: a busy upstream port says what to do", async (t) => {
  const busy = await holdPort();
  const config = await configFile(
    "demo-upstream.yaml",
    await exampleWith("127.0.0.1:0", `http://127.0.0.1:${busy}`),
  );
  const result = await demo(config);
  t.equal(result.status, 1);
  assertOneLine(
    t,
    result.stderr,
    new RegExp(
      `^demo: the example upstream cannot listen on 127\\.0\\.0\\.1:${busy} \\(EADDRINUSE\\), where upstream\\.url in ${config} points: .*GATEHOUSE_CONFIG=`,
    ),
  );
});

t.test("demo: a busy listen port names listen", async (t) => {
  const busy = await holdPort();
  const config = await configFile(
    "demo-listen.yaml",
    await exampleWith(`127.0.0.1:${busy}`, `http://127.0.0.1:${await refusingPort()}`),
  );
  const result = await demo(config);
  t.equal(result.status, 1);
  assertOneLine(
    t,
    result.stderr,
    /^demo: 127\.0\.0\.1:\d+ \(listen\) is already in use.*set listen in /,
  );
});
