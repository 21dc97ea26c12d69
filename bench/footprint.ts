/**
 * The `footprint` scenario: what each gatehouse process costs its pod, on the Node that runs the
 * benchmark. Ready time from exec to the "gatehouse listening" line (median of several starts,
 * the example config), idle RSS, and RSS after a minute of load from 100k distinct clients (an
 * `auth: none` route whose clients are told apart by X-Forwarded-For from a trusted proxy, so each
 * address holds counters of its own). A bare Node HTTP server is measured alike, for scale, and so
 * is one that loads the packages gatehouse starts with and listens: what is left is gatehouse's own.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseDocument } from "yaml";
import { startUpstream } from "./processes.js";
import { figuresSection, type Section } from "./report.js";

const CLI = fileURLToPath(new URL("../src/cli.js", import.meta.url));
const EXAMPLE = fileURLToPath(new URL("../../proxy.config.yaml", import.meta.url));
const STARTS = 7;
const IDLE_SETTLE_MS = 2000;
const CLIENTS = 100_000;
const LOAD_MS = 60_000;
const CONNECTIONS = 32;
const LISTEN = `createServer((q, s) => s.end()).listen(0, "127.0.0.1", () => console.log('{"msg":"gatehouse listening"}'))`;
const BARE_SERVER = `const { createServer } = require("node:http"); ${LISTEN}`;
// The packages a start on the example config loads (undici through its Pool's own module, as
// src/upstream/undici.ts does), resolved from the working directory, the repository's root.
const PACKAGES_SERVER = [
  "undici/lib/dispatcher/pool.js",
  "jose",
  "yaml",
  "pino",
  "prom-client",
  "zod",
]
  .map((name) => `import "${name}";`)
  .concat(`import { createServer } from "node:http"; ${LISTEN}`)
  .join(" ");

/** One process started and measured. */
interface Started {
  readonly pid: number;
  readonly readyMs: number;
  readonly port: number;
  stop(): Promise<void>;
}

/** Resident and peak resident memory of process `pid`, in MB, from /proc. */
function memoryMb(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]);
  return { rss: kb("VmRSS") / 1024, peak: kb("VmHWM") / 1024 };
}

// Starts `node ...args` and resolves when it prints the listening line, timed from the exec.
function startTimed(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<Started> {
  const began = process.hrtime.bigint();
  const child = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  return new Promise((resolve, reject) => {
    let text = "";
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code}`)));
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      text += chunk;
      const line = text.split("\n").find((l) => l.includes('"msg":"gatehouse listening"'));
      if (line === undefined) return;
      const readyMs = Number(process.hrtime.bigint() - began) / 1e6;
      const port = (JSON.parse(line) as { listen?: { port: number } }).listen?.port ?? 0;
      child.stdout.resume().removeAllListeners("data");
      resolve({
        pid: child.pid as number,
        readyMs,
        port,
        stop() {
          child.kill("SIGTERM");
          return exited;
        },
      });
    });
  });
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Ready time and idle RSS over several starts; the first start fills the compile cache. */
async function startsOf(
  args: readonly string[],
): Promise<{ first: number; readyMs: number; idleMb: number }> {
  const ready: number[] = [];
  const idle: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const started = await startTimed(args);
    await new Promise((done) => setTimeout(done, IDLE_SETTLE_MS));
    ready.push(started.readyMs);
    idle.push(memoryMb(started.pid).rss);
    await started.stop();
  }
  return { first: ready[0] as number, readyMs: median(ready), idleMb: median(idle) };
}

/** The example config on this machine's ports, in front of `upstream`, trusting 127.0.0.1. */
async function exampleConfig(dir: string, upstream?: string): Promise<string> {
  const doc = parseDocument(await readFile(EXAMPLE, "utf8"));
  doc.setIn(["listen"], "127.0.0.1:0");
  doc.setIn(["admin_listen"], "127.0.0.1:0");
  if (upstream !== undefined) {
    doc.setIn(["upstream", "url"], upstream);
    doc.setIn(["trusted_proxies"], ["127.0.0.1/32"]);
  }
  const path = join(dir, upstream === undefined ? "example.yaml" : "load.yaml");
  await writeFile(path, doc.toString());
  return path;
}

// Client i's address: 10.x.y.z, one per client.
function address(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/** Sends GET /status from every one of CLIENTS addresses, round and round for LOAD_MS. */
async function load(port: number): Promise<{ requests: number; clients: number; seconds: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const began = Date.now();
  const end = began + LOAD_MS;
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((done, fail) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: "/status",
          agent,
          headers: { "x-forwarded-for": address(i % CLIENTS) },
        },
        (res) => res.resume().once("end", done),
      );
      req.once("error", fail).end();
    });
  // Every client is seen at least once, however slow the machine, and the load lasts LOAD_MS.
  const worker = async () => {
    while (Date.now() < end || next < CLIENTS) await one(next++);
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  agent.destroy();
  return { requests: next, clients: Math.min(next, CLIENTS), seconds: (Date.now() - began) / 1000 };
}

/** Measures the footprint and returns its report. */
export async function measureFootprint(): Promise<Section> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-footprint-"));
  const say = (text: string) => process.stderr.write(`footprint: ${text}\n`);
  try {
    const bare = await startsOf(["-e", BARE_SERVER]);
    say(`bare node http: ready ${bare.readyMs.toFixed(0)} ms, idle ${bare.idleMb.toFixed(1)} MB`);
    const packages = await startsOf(["--input-type=module", "-e", PACKAGES_SERVER]);
    say(`packages: ready ${packages.readyMs.toFixed(0)} ms, idle ${packages.idleMb.toFixed(1)} MB`);
    const gatehouse = await startsOf([CLI, "--config", await exampleConfig(dir)]);
    say(
      `gatehouse: ready ${gatehouse.readyMs.toFixed(0)} ms (first ${gatehouse.first.toFixed(0)} ms), idle ${gatehouse.idleMb.toFixed(1)} MB`,
    );
    const upstream = await startUpstream();
    const loaded = await startTimed([CLI, "--config", await exampleConfig(dir, upstream.url)]);
    say(`loading from ${CLIENTS} clients for at least ${LOAD_MS / 1000} s`);
    const sent = await load(loaded.port);
    await new Promise((done) => setTimeout(done, IDLE_SETTLE_MS));
    const after = memoryMb(loaded.pid);
    await loaded.stop();
    await upstream.stop();
    const rows: Array<[string, string]> = [
      ["Node", process.version],
      [
        "ready from exec, median of " + STARTS,
        `${gatehouse.readyMs.toFixed(0)} ms (bare node http ${bare.readyMs.toFixed(0)} ms, ` +
          `its packages ${packages.readyMs.toFixed(0)} ms)`,
      ],
      ["first start (compile cache empty or absent)", `${gatehouse.first.toFixed(0)} ms`],
      [
        "idle RSS, median",
        `${gatehouse.idleMb.toFixed(1)} MB (bare node http ${bare.idleMb.toFixed(1)} MB, ` +
          `its packages ${packages.idleMb.toFixed(1)} MB)`,
      ],
      [
        `RSS after ${sent.seconds.toFixed(0)} s of load, ${sent.clients} clients`,
        `${after.rss.toFixed(1)} MB (peak ${after.peak.toFixed(1)} MB, ${sent.requests} requests)`,
      ],
    ];
    return figuresSection("footprint", rows);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
