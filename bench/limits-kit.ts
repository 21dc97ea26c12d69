/**
 * What the scenarios that start gatehouse processes of their own (`keys`, `redis`,
 * `trusted-proxies`) share: the run they join, gatehouse processes started with a config of their
 * own on an `auth: none` route counted by the anonymous plan and an admin listener to read
 * /metrics from, and a process's memory read from outside.
 */
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pin, type Pinning } from "./pin.js";
import type { LoadOptions } from "./load.js";
import { refusingPort } from "../test/helpers/ports.js";
import { startGatehouse, type Served } from "./processes.js";

/** The run these scenarios join: its upstream, its key and settings. */
export interface LimitsContext {
  readonly upstream: Served;
  /** The run's signing key, so that every gatehouse of the run starts without a warning. */
  readonly keyFile: string;
  /** A directory for config files, removed with the run. */
  readonly dir: string;
  readonly pinning: Pinning | null;
  readonly load: LoadOptions;
  /** Stops `served` with the run's own processes. */
  adopt(served: Served): void;
}

/** A limit high enough that no run is ever refused: these scenarios measure counting. */
export const NEVER_REACHED = 1_000_000_000_000;

const START_ATTEMPTS = 3;

/** A gatehouse process, the URL of its admin listener and its config file. */
export interface Admin {
  readonly served: Served;
  readonly adminUrl: string;
  readonly configPath: string;
}

/** The path these scenarios send to: an `auth: none` route counted by the anonymous plan. */
export const OPEN_ROUTE = "/v1/status";

/**
 * Starts gatehouse, called `name`, with the config that `body` makes from its listen and admin
 * addresses (the signing key and upstream come from `context`), pinned with the proxies. Its
 * ports are taken below the ephemeral range, where no port-0 listener of another program lands
 * between choosing a port and listening on it; should one be taken meanwhile all the same, the
 * start is tried again on others.
 */
export async function startConfigured(
  name: string,
  context: LimitsContext,
  body: (listen: string, adminListen: string) => string,
  execArgv: readonly string[] = [],
): Promise<Admin> {
  const configPath = join(context.dir, `${name.replaceAll(" ", "-")}.yaml`);
  for (let attempt = 1; ; attempt++) {
    const port = await refusingPort();
    let adminPort = await refusingPort();
    while (adminPort === port) adminPort = await refusingPort();
    await writeFile(configPath, body(`127.0.0.1:${port}`, `127.0.0.1:${adminPort}`));
    try {
      const served = await startGatehouse(name, configPath, port, process.env, [...execArgv]);
      if (context.pinning !== null) pin(served.pid, context.pinning.proxies);
      return { served, adminUrl: `http://127.0.0.1:${adminPort}`, configPath };
    } catch (error) {
      if (attempt === START_ATTEMPTS || !String(error).includes("EADDRINUSE")) throw error;
    }
  }
}

/**
 * The lines every config of these scenarios starts with; `trusted` are the `trusted_proxies`
 * (none when empty).
 */
export function configHead(
  listen: string,
  adminListen: string,
  context: LimitsContext,
  trusted: readonly string[],
): string {
  return `listen: ${listen}
admin_listen: ${adminListen}
${trusted.length > 0 ? `trusted_proxies: [${trusted.join(", ")}]\n` : ""}upstream:
  url: ${context.upstream.url}
tokens:
  signing:
    algorithm: EdDSA
    key_file: ${JSON.stringify(context.keyFile)}
routes:
  - path: ${OPEN_ROUTE}
    methods: [GET]
    auth: none
`;
}

/** The sum of every series of metric `name` on gatehouse's /metrics; NaN when there is none. */
export async function metric(admin: Admin, name: string): Promise<number> {
  const text = await (await fetch(`${admin.adminUrl}/metrics`)).text();
  let sum = Number.NaN;
  for (const line of text.split("\n")) {
    if (line.startsWith(name) && (line[name.length] === " " || line[name.length] === "{")) {
      sum = (Number.isNaN(sum) ? 0 : sum) + Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return sum;
}

/** Node options for a gatehouse process whose heap `collectedHeap` reads. */
export const COLLECTABLE: readonly string[] = [
  "--expose-gc",
  "--import",
  new URL("./gc-on-signal.js", import.meta.url).href,
];
// Time for the signal's collection to run before /metrics is read; the collection takes
// milliseconds, this leaves room for a loaded machine.
const GC_SETTLE_MS = 1000;
const HEAP = "gatehouse_process_nodejs_heap_size_used_bytes";

/** gatehouse's heap in use after a full garbage collection; started with `COLLECTABLE`. */
export async function collectedHeap(admin: Admin): Promise<number> {
  process.kill(admin.served.pid, "SIGUSR2");
  await new Promise((done) => setTimeout(done, GC_SETTLE_MS));
  return metric(admin, HEAP);
}

/** A memory field of `/proc/PID/status` (VmRSS, VmHWM: peak RSS), in bytes. */
export function procMemory(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
  if (match === null) throw new Error(`no ${field} for process ${pid}`);
  return Number(match[1]) * 1024;
}

/** Bytes as MB with one decimal. */
export function mb(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** A Markdown table from a heading row and rows. */
export function table(headings: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.join(" | ")} |`;
  return [line(headings), `|${headings.map(() => " --- ").join("|")}|`, ...rows.map(line)].join(
    "\n",
  );
}
