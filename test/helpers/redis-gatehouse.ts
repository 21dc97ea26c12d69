/** Small probes of a gatehouse that counts in Redis: its /metrics and its answers. */
import { eventually } from "./client.js";
import type { TestGatehouse } from "./gatehouse.js";

/** The value of the first /metrics line starting with `name` (NaN when there is none). */
export async function metric(g: TestGatehouse, name: string): Promise<number> {
  const { port } = g.gatehouse.adminAddress;
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split("\n").find((row) => row.startsWith(name));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(" ") + 1));
}

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
