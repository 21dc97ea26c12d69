/** Redis's own account of its work, from `INFO commandstats` and `INFO cpu`. */
import type { Redis } from "ioredis";

// Commands the bench itself sends to read the figures, left out of gatehouse's.
const OWN_COMMANDS = new Set(["info"]);

/** Calls per command name since Redis started, and its CPU time (system + user) in seconds. */
export interface RedisStats {
  readonly calls: ReadonlyMap<string, number>;
  readonly cpuS: number;
}

/** The `field:value` lines of an INFO reply. */
export function infoFields(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon > 0 && !line.startsWith("#")) fields.set(line.slice(0, colon), line.slice(colon + 1));
  }
  return fields;
}

/** The figures in the replies to `INFO commandstats` and `INFO cpu`. */
export function parseStats(commandstats: string, cpuInfo: string): RedisStats {
  const calls = new Map<string, number>();
  for (const [key, value] of infoFields(commandstats)) {
    const count = /(?:^|,)calls=(\d+)/.exec(value);
    if (key.startsWith("cmdstat_") && count !== null) calls.set(key.slice(8), Number(count[1]));
  }
  const cpu = infoFields(cpuInfo);
  return {
    calls,
    cpuS: Number(cpu.get("used_cpu_sys") ?? 0) + Number(cpu.get("used_cpu_user") ?? 0),
  };
}

/** Reads Redis's figures now. */
export async function redisStats(client: Redis): Promise<RedisStats> {
  return parseStats(await client.info("commandstats"), await client.info("cpu"));
}

/** The figures of several servers (a Cluster's primaries) added together. */
export function summedStats(each: readonly RedisStats[]): RedisStats {
  const calls = new Map<string, number>();
  for (const stats of each) {
    for (const [name, count] of stats.calls) calls.set(name, (calls.get(name) ?? 0) + count);
  }
  return { calls, cpuS: each.reduce((total, stats) => total + stats.cpuS, 0) };
}

/**
 * Redis's work between two readings: the calls by command (the bench's own INFO left out), the
 * Lua scripts among them (EVALSHA and EVAL), and the CPU time in microseconds.
 */
export function difference(before: RedisStats, after: RedisStats) {
  const calls = new Map<string, number>();
  for (const [name, count] of after.calls) {
    const delta = count - (before.calls.get(name) ?? 0);
    if (delta > 0 && !OWN_COMMANDS.has(name)) calls.set(name, delta);
  }
  const scripts = (calls.get("evalsha") ?? 0) + (calls.get("eval") ?? 0);
  return { calls, scripts, cpuUs: (after.cpuS - before.cpuS) * 1e6 };
}

/** The calls per request, most frequent first: `get 2.000, evalsha 1.000`. */
export function perRequest(calls: ReadonlyMap<string, number>, requests: number): string {
  return [...calls]
    .sort(([, a], [, b]) => b - a)
    .map(([name, count]) => `${name} ${(count / requests).toFixed(3)}`)
    .join(", ");
}
