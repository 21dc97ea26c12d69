/**
 * `token`: the token endpoint's cost when a client asks again with its right secret, the usual
 * case (a client renewing its token). One of the shared gatehouse processes answers autocannon's
 * POSTs (HTTP Basic, the secret from `secret_env`) for the run's duration; its CPU time (all
 * threads, scrypt's thread pool included) is divided by the responses it gave. The client asks
 * once before the load, as a renewing client has: concurrent first requests from one address
 * beyond `tokens.failure_limit` would be refused while no secret is remembered yet.
 */
import { processCpuNs } from "./cpu.js";
import { runLoad } from "./load.js";
import { figuresSection, type Section } from "./report.js";
import { BEARER_CLIENT, fetchToken, TOKEN_PATH } from "./scenarios.js";
import type { Shared } from "./shared.js";

/** Measures `POST /oauth/token` with the right secret, again and again. */
export async function measureToken(shared: Shared): Promise<Section> {
  const [gatehouse] = await shared.gatehouses();
  const { load } = await shared.context();
  const credentials = Buffer.from(`${BEARER_CLIENT}:${shared.secrets.bearer}`).toString("base64");
  const headers = {
    authorization: `Basic ${credentials}`,
    "content-type": "application/x-www-form-urlencoded",
  };
  const request = { method: "POST", body: "grant_type=client_credentials" };
  await fetchToken(gatehouse, BEARER_CLIENT, shared.secrets.bearer);
  const before = processCpuNs(gatehouse.pid);
  const result = await runLoad(gatehouse.url + TOKEN_PATH, headers, load, request);
  const cpuNs = processCpuNs(gatehouse.pid) - before;
  gatehouse.assertAlive();
  if (result.non2xx > 0 || result.completed === 0) {
    throw new Error(`${TOKEN_PATH} answered ${result.non2xx} of ${result.completed} with non-2xx`);
  }
  return figuresSection("token: the right secret again", [
    ["requests/s", result.rps.toFixed(0)],
    ["p50 / p99", `${result.p50} ms / ${result.p99} ms`],
    ["CPU per request", `${(cpuNs / result.completed / 1000).toFixed(0)} µs`],
  ]);
}
