/**
 * The load generator for requests with DPoP-bound tokens: autocannon, run from its API in a
 * process of its own (as load.ts runs its command line), with a `setupRequest` that gives every
 * request a fresh proof, signed here, so that signing costs the load generator and never the
 * proxy. Its one argument is the job, as JSON (`DpopJob`); it prints autocannon's result on one
 * line, as `autocannon --json` does.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dpopHeaders, type BoundKey } from "./dpop-proof.js";

/** What one run of this process sends. */
export interface DpopJob {
  readonly url: string;
  /** Headers sent on every request, besides the token and its proof. */
  readonly headers: Readonly<Record<string, string>>;
  readonly connections: number;
  readonly durationS: number;
  /** Requests per second over all connections; undefined: as fast as the target answers. */
  readonly rate: number | undefined;
  /** A JSON file holding the client's keys and their tokens: `{ "keys": BoundKey[] }`. */
  readonly keysFile: string;
}

// The part of autocannon's request that setupRequest changes.
interface RequestParams {
  headers: Record<string, string>;
}

interface AutocannonRequest {
  method: string;
  path: string;
  setupRequest(request: RequestParams): RequestParams;
}

type Autocannon = (options: Record<string, unknown>) => Promise<unknown>;

const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon;

async function main(job: DpopJob): Promise<void> {
  const { keys } = JSON.parse(readFileSync(job.keysFile, "utf8")) as { keys: BoundKey[] };
  const fresh = dpopHeaders(keys, job.url);
  const url = new URL(job.url);
  // autocannon copies its options for each connection, this request with them.
  const request: AutocannonRequest = {
    method: "GET",
    path: url.pathname + url.search,
    // Called for every request autocannon builds: the same headers, a new proof.
    setupRequest: (params) => ({ ...params, headers: { ...params.headers, ...fresh() } }),
  };
  const result = await autocannon({
    url: job.url,
    headers: job.headers,
    connections: job.connections,
    duration: job.durationS,
    ...(job.rate === undefined ? {} : { overallRate: job.rate }),
    requests: [request],
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main(JSON.parse(process.argv[2] ?? "null") as DpopJob).catch((error: unknown) => {
  process.stderr.write(`dpop-load: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
