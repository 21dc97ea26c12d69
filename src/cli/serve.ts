/** `gatehouse run` and `gatehouse check`: the proxy itself, and the check of its file. */
import { ConfigError, MissingConfigError, type ConfigProblem } from "../config/load.js";
import { loadSnapshot } from "../config/snapshot.js";
import { startGatehouse } from "../server.js";
import { holdTickShape } from "../lifecycle/tick-shape.js";

// "1 route", "2 routes".
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

function warningLines(file: string, warnings: readonly ConfigProblem[]): string {
  return warnings.map((w) => `${file}:${w.line}:${w.col} warning: ${w.message}\n`).join("");
}

/** What a command prints for a file it cannot use: a missing one says how to name another. */
export function configErrorText(error: ConfigError): string {
  const how =
    error instanceof MissingConfigError
      ? "; name the configuration file with --config FILE or $GATEHOUSE_CONFIG"
      : "";
  return `${error.message}${how}\n`;
}

/**
 * Validates the file: a summary on stdout and 0, or every problem on stderr and 1. Without its
 * environment (`--no-env`), unset variables and missing files are not problems.
 */
export async function check(
  configPath: string,
  env: NodeJS.ProcessEnv,
  withoutEnvironment: boolean,
): Promise<number> {
  try {
    const config = await loadSnapshot(configPath, { env, withoutEnvironment });
    const { routes, clients, plans } = config.file;
    process.stderr.write(warningLines(configPath, config.warnings));
    const unchecked = withoutEnvironment ? "; variables and missing files not checked" : "";
    process.stdout.write(
      `${configPath}: ok (${count(routes.length, "route")}, ${count(clients.length, "client")}, ` +
        `${count(Object.keys(plans).length, "plan")}; upstream ${config.upstream.url.href}${unchecked})\n`,
    );
    return 0;
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(configErrorText(error));
      return 1;
    }
    throw error;
  }
}

/** Serves until SIGTERM or SIGINT; resolves with 0 after a clean drain, 1 otherwise. */
export async function run(configPath: string, env: NodeJS.ProcessEnv): Promise<number> {
  holdTickShape();
  let gatehouse;
  try {
    gatehouse = await startGatehouse({ configPath, env });
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(configErrorText(error));
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
