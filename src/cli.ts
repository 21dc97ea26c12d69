#!/usr/bin/env node
/** The `gatehouse` command: run the proxy, check a config file, or make secrets and keys. */
import { parseArgs } from "node:util";
import { limitsCommand } from "./admin/limits-cli.js";
import { ConfigError } from "./config/load.js";
import { loadSnapshot } from "./config/snapshot.js";
import { startGatehouse } from "./server.js";
import { generateKeyPem } from "./tokens/keys.js";
import { hashSecret } from "./tokens/secrets.js";

const USAGE = `usage:
  gatehouse [--config FILE]            run the proxy (default ./proxy.config.yaml, or $GATEHOUSE_CONFIG)
  gatehouse check [--config FILE]      validate the file; print every error as FILE:LINE:COL message
  gatehouse hash-secret                read a client secret on stdin, print the value for secret_hash
  gatehouse keygen [--alg EdDSA|ES256] print a new PKCS#8 PEM signing key
  gatehouse limits show|reset ID [--address] [--admin URL] [--json]
                                       read or reset a client's counters through the admin API
`;

/** Exit codes: 0 success, 1 invalid config or failure, 2 usage error. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  if (argv[0] === "limits") {
    return limitsCommand(argv.slice(1), env, process.stdout, process.stderr);
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        config: { type: "string", short: "c" },
        alg: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
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
  if (values.alg !== undefined && command !== "keygen") {
    process.stderr.write(`gatehouse: --alg is an option of keygen\n${USAGE}`);
    return 2;
  }
  switch (command) {
    case "run":
      return run(configPath, env);
    case "check":
      return check(configPath, env);
    case "hash-secret":
      return hashSecretCommand();
    case "keygen":
      return keygen(values.alg ?? "EdDSA");
    default:
      process.stderr.write(`gatehouse: unknown command ${JSON.stringify(command)}\n${USAGE}`);
      return 2;
  }
}

async function keygen(alg: string): Promise<number> {
  if (alg !== "EdDSA" && alg !== "ES256") {
    process.stderr.write(
      `gatehouse: --alg must be EdDSA or ES256 (HS256 uses a secret in secret_env)\n${USAGE}`,
    );
    return 2;
  }
  process.stdout.write(await generateKeyPem(alg));
  return 0;
}

async function hashSecretCommand(): Promise<number> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  // SPEC §6: one trailing \n or \r\n is stripped (echo and most editors add one).
  const secret = Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
  if (secret === "") {
    process.stderr.write("gatehouse: hash-secret read an empty secret from stdin\n");
    return 1;
  }
  process.stdout.write(`${await hashSecret(secret)}\n`);
  return 0;
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
