/** Starts gatehouse on port 0 from YAML written to a temporary folder, logging into memory. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import type { Logger } from "pino";
import { createLogger } from "../../src/log.js";
import { startGatehouse, type Gatehouse, type StartOptions } from "../../src/server.js";

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
  /** The first log line `match` accepts, once it is written. */
  logLine(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** Rewrites the config file in place. */
  writeConfig(yaml: string): Promise<void>;
  close(): Promise<void>;
}

/** A log line, parsed. */
type LogLine = Record<string, unknown>;

/**
 * A debug-level logger keeping every line it writes, parsed, in `logs`; `line` resolves with the
 * first line, written or still to come, that `match` accepts.
 */
export function memoryLogger(): {
  log: Logger;
  logs: LogLine[];
  line(match: (line: LogLine) => boolean): Promise<LogLine>;
} {
  const logs: LogLine[] = [];
  const written = new EventEmitter();
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line !== "") logs.push(JSON.parse(line) as LogLine);
      }
      written.emit("line");
      done();
    },
  });
  const line = (match: (line: LogLine) => boolean) =>
    new Promise<LogLine>((resolve) => {
      const look = () => {
        const found = logs.find(match);
        if (found === undefined) return;
        written.off("line", look);
        resolve(found);
      };
      written.on("line", look);
      look();
    });
  return { log: createLogger("debug", sink), logs, line };
}

/** Writes `yaml` as proxy.config.yaml in a new folder and starts gatehouse on it. */
export async function startTestGatehouse(
  yaml: string,
  options: Partial<Omit<StartOptions, "configPath" | "log">> & {
    files?: Record<string, string>;
  } = {},
): Promise<TestGatehouse> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-test-"));
  const configPath = join(dir, "proxy.config.yaml");
  await writeFile(configPath, yaml);
  for (const [name, content] of Object.entries(options.files ?? {})) {
    await writeFile(join(dir, name), content);
  }
  const { log, logs, line } = memoryLogger();
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
    logLine: line,
    writeConfig: (text) => writeFile(configPath, text),
    async close() {
      await gatehouse.shutdown();
      await rm(dir, { recursive: true, force: true });
    },
  };
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
