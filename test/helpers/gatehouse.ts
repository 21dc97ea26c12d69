/** Starts gatehouse on port 0 from YAML written to a temporary folder, logging into memory. */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Writable } from "node:stream";
import type { Logger } from "pino";
import type { Test } from "tap";
import { createLogger } from "../../src/log.js";
import { startGatehouse, type Gatehouse, type StartOptions } from "../../src/server.js";
import { manualClock } from "./clock.js";

/** A gatehouse started for a test, with its config folder and captured log lines. */
export interface TestGatehouse {
  readonly gatehouse: Gatehouse;
  /** http://127.0.0.1:PORT */
  readonly url: string;
  readonly port: number;
  /** The admin listener: http://127.0.0.1:PORT */
  readonly adminUrl: string;
  readonly dir: string;
  readonly configPath: string;
  /** Every log line written so far, parsed. */
  readonly logs: Array<Record<string, unknown>>;
  /** Resolves with the first log line, written so far or later, for which `match` holds. */
  logged(match: LineMatch): Promise<Record<string, unknown>>;
  /** Rewrites the config file in place. */
  writeConfig(yaml: string): Promise<void>;
  close(): Promise<void>;
}

/** Picks a log line. */
export type LineMatch = (line: Record<string, unknown>) => boolean;

/** A debug-level logger keeping every line it writes, parsed, in `logs`. */
export function memoryLogger(): {
  log: Logger;
  logs: Array<Record<string, unknown>>;
  logged(match: LineMatch): Promise<Record<string, unknown>>;
} {
  const logs: Array<Record<string, unknown>> = [];
  const waiting = new Set<{ match: LineMatch; found: (line: Record<string, unknown>) => void }>();
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const text of chunk.toString("utf8").split("\n")) {
        if (text === "") continue;
        const line = JSON.parse(text) as Record<string, unknown>;
        logs.push(line);
        for (const waiter of waiting) {
          if (!waiter.match(line)) continue;
          waiting.delete(waiter);
          waiter.found(line);
        }
      }
      done();
    },
  });
  return {
    log: createLogger("debug", sink),
    logs,
    logged: (match) =>
      new Promise((found) => {
        const seen = logs.find(match);
        if (seen === undefined) waiting.add({ match, found });
        else found(seen);
      }),
  };
}

/** Writes `yaml` as proxy.config.yaml in a new folder and starts gatehouse on it. */
export async function startTestGatehouse(
  yaml: string,
  options: Partial<Omit<StartOptions, "configPath" | "log">> & {
    /** More files by path in the config's folder (`keys/a.pem`), their folders made. */
    files?: Record<string, string>;
  } = {},
): Promise<TestGatehouse> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-test-"));
  const configPath = join(dir, "proxy.config.yaml");
  await writeFile(configPath, yaml);
  for (const [name, content] of Object.entries(options.files ?? {})) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), content);
  }
  const { log, logs, logged } = memoryLogger();
  const gatehouse = await startGatehouse({
    listen: { host: "127.0.0.1", port: 0 },
    adminListen: { host: "127.0.0.1", port: 0 },
    watch: false,
    ...options,
    configPath,
    log,
  });
  const port = gatehouse.address.port;
  return {
    gatehouse,
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${gatehouse.adminAddress.port}`,
    port,
    dir,
    configPath,
    logs,
    logged,
    writeConfig: (text) => writeFile(configPath, text),
    async close() {
      await gatehouse.shutdown();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A gatehouse on a clock of the test's own, and the way to move it. */
export interface ClockedGatehouse {
  readonly g: TestGatehouse;
  advance(ms: number): void;
}

/**
 * Starts gatehouse on `yaml` with a clock that moves only when the test advances it (its
 * wall-clock time `epochMs` plus the clock's, when given), closed when `t` ends.
 */
export async function startOnTestClock(
  t: Test,
  yaml: string,
  epochMs?: number,
): Promise<ClockedGatehouse> {
  const clock = manualClock();
  const now = epochMs === undefined ? {} : { now: () => epochMs + clock.monotonic() };
  const g = await startTestGatehouse(yaml, { clock, ...now });
  t.teardown(() => g.close());
  return { g, advance: (ms) => clock.advance(ms) };
}

/** A minimal config in front of `upstreamUrl`, with extra YAML appended. */
export function configFor(upstreamUrl: string, extra = ""): string {
  return `upstream:\n  url: ${upstreamUrl}\n  timeout: 2s\nshutdown:\n  grace: 2s\n${extra}`;
}

/** YAML: an `anonymous` plan of `limit` requests an hour, counting the `auth: none` route /open. */
export function anonymousOpenRoute(limit: number): string {
  return `  anonymous:
    rate_limit: { limit: ${limit}, window: 1h }
routes:
  - path: /open
    methods: [GET]
    auth: none
`;
}
