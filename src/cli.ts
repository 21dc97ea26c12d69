#!/usr/bin/env node
/** The `gatehouse` command: run the proxy, or check a config file. */
import { parseArgs } from "node:util";
import { ConfigError } from "./config/load.js";
import { loadSnapshot } from "./config/snapshot.js";
import { startGatehouse } from "./server.js";

const USAGE = `usage:
  gatehouse [--config FILE]            run the proxy (default ./proxy.config.yaml, or $GATEHOUSE_CONFIG)
  gatehouse check [--config FILE]      validate the file; print every error as FILE:LINE:COL message
`;

/** Exit codes: 0 success, 1 invalid config or failure, 2 usage error. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: { config: { type: "string", short: "c" }, help: { type: "boolean", short: "h" } },
    });
  } catch (error) {
    process.stderr.write(`gatehouse: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help === true) {
    process.stdout.write(USAGE);
    return 0;
  }
  const configPath = values.config ?? env.GATEHOUSE_CONFIG ?? "proxy.config.yaml";
  const [command = "run", ...rest] = positionals;
  if (rest.length > 0) {
    process.stderr.write(`gatehouse: unexpected argument ${JSON.stringify(rest[0])}\n${USAGE}`);
    return 2;
  }
  switch (command) {
    case "run":
      return run(configPath, env);
    case "check":
      return check(configPath, env);
    default:
      process.stderr.write(`gatehouse: unknown command ${JSON.stringify(command)}\n${USAGE}`);
      return 2;
  }
}

async function check(configPath: string, env: NodeJS.ProcessEnv): Promise<number> {
  try {
    const config = await loadSnapshot(configPath, { env });
    const { routes, clients, plans } = config.file;
    process.stdout.write(
      `${configPath}: ok (${routes.length} routes, ${clients.length} clients, ` +
        `${Object.keys(plans).length} plans; upstream ${config.upstream.url.href})\n`,
    );
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

async function run(configPath: string, env: NodeJS.ProcessEnv): Promise<number> {
  let gatehouse;
  try {
    gatehouse = await startGatehouse({ configPath, env });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 1;
    }
    process.stderr.write(`gatehouse: cannot start: ${(error as Error).message}\n`);
    return 1;
  }
  const { log } = gatehouse;
  process.on("SIGHUP", () => void gatehouse.reload("SIGHUP"));
  return new Promise<number>((done) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, "second signal: exiting now");
        done(1);
        return;
      }
      stopping = true;
      log.info({ signal }, "shutting down");
      gatehouse.shutdown().then(
        () => done(0),
        (error: unknown) => {
          log.error({ err: error }, "shutdown failed");
          done(1);
        },
      );
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  }).then((code) => new Promise<number>((done) => log.flush(() => done(code))));
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`gatehouse: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
