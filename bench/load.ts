/**
 * Drives one target with autocannon, run in its own process so the load generator's CPU never
 * counts as the proxy's.
 */
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { DpopJob } from "./dpop-load.js";
import { pinned } from "./pin.js";

const AUTOCANNON = createRequire(import.meta.url).resolve("autocannon/autocannon.js");
const DPOP_LOAD = fileURLToPath(new URL("./dpop-load.js", import.meta.url));

/** The load applied to every target alike. */
export interface LoadOptions {
  readonly connections: number;
  readonly durationS: number;
  /** Requests per second over all connections; undefined: as fast as the target answers. */
  readonly rate: number | undefined;
  /** The cores autocannon runs on (a taskset list), or null for anywhere. */
  readonly cores: string | null;
}

/** What autocannon measured for one run. */
export interface LoadResult {
  readonly rps: number;
  /** Latency percentiles in milliseconds. */
  readonly p50: number;
  readonly p99: number;
  /** Responses received, whatever their status. */
  readonly completed: number;
  readonly non2xx: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
}

interface AutocannonJson {
  requests: { average: number };
  latency: { p50: number; p99: number };
  "2xx": number;
  non2xx: number;
  errors: number;
  timeouts: number;
}

/** A request other than a GET without a body. */
export interface LoadRequest {
  readonly method: string;
  readonly body: string;
}

/**
 * Sends `request` (GET by default) to `url` with `headers` for the configured time and returns
 * autocannon's figures. With `keysFile` (dpop-load.ts), each GET also carries a DPoP-bound token
 * and a proof made for it alone.
 */
export function runLoad(
  url: string,
  headers: Readonly<Record<string, string>>,
  options: LoadOptions,
  request?: LoadRequest,
  keysFile?: string,
): Promise<LoadResult> {
  if (keysFile !== undefined) {
    const { connections, durationS, rate } = options;
    const job: DpopJob = { url, headers, connections, durationS, rate, keysFile };
    return runAutocannon([DPOP_LOAD, JSON.stringify(job)], options.cores);
  }
  const args = [
    AUTOCANNON,
    "--json",
    "--no-progress",
    "--connections",
    String(options.connections),
    "--duration",
    String(options.durationS),
  ];
  if (options.rate !== undefined) args.push("--overallRate", String(options.rate));
  for (const [name, value] of Object.entries(headers)) args.push("--headers", `${name}=${value}`);
  if (request !== undefined) args.push("--method", request.method, "--body", request.body);
  args.push(url);
  return runAutocannon(args, options.cores);
}

// Runs node with `args` on `cores` and reads autocannon's JSON result from the last line.
function runAutocannon(args: string[], cores: string | null): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const [command, commandArgs] = pinned(cores, process.execPath, args);
    const child = spawn(command, commandArgs, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = stdout.trim().split("\n").pop() ?? "";
      if (code !== 0 || !line.startsWith("{")) {
        reject(new Error(`autocannon exited with ${code}: ${stderr.trim() || stdout.trim()}`));
        return;
      }
      const result = JSON.parse(line) as AutocannonJson;
      resolve({
        rps: result.requests.average,
        p50: result.latency.p50,
        p99: result.latency.p99,
        completed: result["2xx"] + result.non2xx,
        non2xx: result.non2xx,
        errors: result.errors + result.timeouts,
      });
    });
  });
}
