/** Small probes of a gatehouse that counts in Redis: its store's health and its answers. */
import { eventually } from "./client.js";
import type { TestGatehouse } from "./gatehouse.js";
import { metric } from "./metrics.js";

/** Whether the store connected and its health check was answered, within `deadlineMs`. */
export function connected(g: TestGatehouse, deadlineMs = 10_000): Promise<boolean> {
  return eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 1, deadlineMs);
}

/** A GET of `path` whose body is read, so the connection is free again. */
export async function get(g: TestGatehouse, path = "/open"): Promise<Response> {
  const response = await fetch(`${g.url}${path}`);
  await response.arrayBuffer();
  return response;
}

/** The status of /readyz. */
export async function readiness(g: TestGatehouse): Promise<number> {
  return (await fetch(`${g.url}/readyz`)).status;
}
