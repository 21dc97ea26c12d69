/**
 * A load driver for requests that autocannon cannot vary: each request gets headers of its own
 * (a distinct X-Forwarded-For per request, to make distinct clients), and the requests are spread
 * over several processes. Runs in the bench's own process; its figures are counts, never CPU.
 */
import { Agent, request } from "node:http";

/** What the driven processes answered. */
export interface Driven {
  /** Responses by status code. */
  readonly statuses: ReadonlyMap<number, number>;
  /** Requests that got no response (connection errors). */
  readonly errors: number;
  readonly ms: number;
}

/** How many responses had `status`. */
export function answered(driven: Driven, status: number): number {
  return driven.statuses.get(status) ?? 0;
}

function get(
  agent: Agent,
  url: URL,
  headers: Readonly<Record<string, string>>,
): Promise<number | undefined> {
  return new Promise((resolve) => {
    const req = request(url, { agent, headers }, (res) => {
      res.resume();
      res.once("end", () => resolve(res.statusCode));
      res.once("error", () => resolve(undefined));
    });
    req.once("error", () => resolve(undefined));
    req.end();
  });
}

/**
 * Sends `count` GET requests, request `i` to `urls[i % urls.length]` with `headersFor(i)`, over
 * `connections` keep-alive connections in all (each one sends its next request once the previous
 * one's response has ended), and counts the answers.
 */
export async function drive(
  urls: readonly string[],
  count: number,
  connections: number,
  headersFor: (i: number) => Readonly<Record<string, string>>,
): Promise<Driven> {
  const agents = urls.map(
    () => new Agent({ keepAlive: true, maxSockets: Math.ceil(connections / urls.length) }),
  );
  const targets = urls.map((url) => new URL(url));
  const statuses = new Map<number, number>();
  let errors = 0;
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      const which = i % targets.length;
      const status = await get(agents[which] as Agent, targets[which] as URL, headersFor(i));
      if (status === undefined) errors++;
      else statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
  };
  try {
    await Promise.all(Array.from({ length: connections }, worker));
  } finally {
    for (const agent of agents) agent.destroy();
  }
  return { statuses, errors, ms: performance.now() - started };
}

/** The i-th of 2^24 distinct IPv4 client addresses in `first`.0.0.0/8. */
export function clientAddress(first: number, i: number): string {
  return `${first}.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}
