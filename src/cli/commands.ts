/**
 * The commands of `gatehouse`: each with its usage line, its help and the options it takes. A
 * command's code is imported when it runs, so `gatehouse version` loads no more than it needs.
 */

/** What a command is run with, once its options and arguments have been checked. */
export interface CommandInput {
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly positionals: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** The command's usage and help, printed after a usage error. */
  readonly help: string;
}

/** One command. */
export interface Command {
  readonly name: string;
  /** What follows `gatehouse` on its usage line. */
  readonly usage: string;
  readonly summary: string;
  /** What `gatehouse help NAME` adds below the usage line. */
  readonly help: string;
  /** The options it takes (the names of `OPTIONS` entries). */
  readonly options: readonly string[];
  /** How many arguments it takes at most. */
  readonly maxArgs: number;
  run(input: CommandInput): Promise<number>;
}

/** Every option of every command, for `parseArgs`. */
export const OPTIONS = {
  config: { type: "string", short: "c" },
  alg: { type: "string" },
  jwks: { type: "string" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean" },
  address: { type: "boolean" },
  admin: { type: "string" },
  json: { type: "boolean" },
  out: { type: "string", short: "o" },
  "no-env": { type: "boolean" },
  token: { type: "string" },
} as const;

const CONFIG_HELP = `--config FILE, -c FILE  the configuration file (default: $GATEHOUSE_CONFIG, else ./proxy.config.yaml)`;

/** The commands, in the order `gatehouse help` lists them. */
export const COMMANDS: readonly Command[] = [
  {
    name: "run",
    usage: "[run] [--config FILE]",
    summary: "run the proxy (the default command)",
    help: `Serves until SIGTERM or SIGINT, then drains and exits 0. SIGHUP, or a change to the file or to a\nkey, JWKS or CA file it names, reloads it.\n${CONFIG_HELP}`,
    options: ["config"],
    maxArgs: 0,
    run: async ({ values, env }) => (await import("./serve.js")).run(configPath(values, env), env),
  },
  {
    name: "check",
    usage: "check [--config FILE] [--no-env]",
    summary: "validate the file; print every problem as FILE:LINE:COL message",
    help: `Exits 1 when the file has an error; warnings (FILE:LINE:COL warning: ...) leave it at 0.\n${CONFIG_HELP}\n--no-env                check the file away from its deployment (in CI): unset variables and\n                        missing key files are not reported; every other problem is`,
    options: ["config", "no-env"],
    maxArgs: 0,
    run: async ({ values, env }) =>
      (await import("./serve.js")).check(configPath(values, env), env, values["no-env"] === true),
  },
  {
    name: "token",
    usage: "token check [--config FILE] [--token TOKEN] [--json]",
    summary: "say whether the proxy would accept a bearer token, and why",
    help: `Reads the token on stdin (unseen on a terminal), or from --token; surrounding whitespace and a\nleading "Bearer " are dropped. Prints the token's header and claims (never the token or its\nsignature), the issuer and key it names, the verdict of the proxy's own verifier, and for an\naccepted token its client, plan, scopes and the bearer routes it may call. Exits 0 when the\ntoken is accepted, 1 when it is refused.\n${CONFIG_HELP}\n--token TOKEN           the token (it then shows in the shell's history and the process list)\n--json                  print the same facts as one JSON object`,
    options: ["config", "token", "json"],
    maxArgs: 1,
    run: async (input) =>
      (await import("./token-check.js")).tokenCommand(input, configPath(input.values, input.env)),
  },
  {
    name: "hash-secret",
    usage: "hash-secret",
    summary: "read a client secret, print the value for secret_hash",
    help: 'On a terminal, asks for the secret twice without echoing it. Otherwise reads it from stdin,\nwithout one trailing newline: echo "$SECRET" | gatehouse hash-secret',
    options: [],
    maxArgs: 0,
    run: async () => (await import("./keys.js")).hashSecretCommand(),
  },
  {
    name: "keygen",
    usage: "keygen [--alg EdDSA|ES256] [--out FILE] [--jwks FILE]",
    summary: "write a new PKCS#8 PEM signing key to FILE (mode 0600) or print it; --jwks: its JWKS",
    help: "For tokens.signing.key_file: gatehouse keygen --out keys/signing.pem (HS256 uses a secret in\nsecret_env instead). For a private_key_jwt client: gatehouse keygen --out client.pem --jwks\nclient.jwks.json; the client keeps client.pem, and its jwks_file names client.jwks.json.\n--alg EdDSA|ES256     the key's algorithm (default EdDSA)\n--out FILE, -o FILE   write the key to FILE, readable by its owner only; an existing FILE is\n                      never overwritten. Without --out the key is printed on stdout.\n--jwks FILE           also write the key's public JWKS to FILE (mode 0644), with or without\n                      --out; an existing FILE is never overwritten",
    options: ["alg", "out", "jwks"],
    maxArgs: 0,
    run: async ({ values }) =>
      (await import("./keys.js")).keygen(
        String(values.alg ?? "EdDSA"),
        typeof values.out === "string" ? values.out : undefined,
        typeof values.jwks === "string" ? values.jwks : undefined,
      ),
  },
  {
    name: "pubkey",
    usage: "pubkey [FILE]",
    summary: "print the public key (SPKI PEM) of a private key, for previous_keys",
    help: "Reads the PKCS#8 PEM private key in FILE, or on stdin without FILE. When rotating, keep the\nold key's public half in tokens.previous_keys: gatehouse pubkey keys/old.pem > keys/old.pub.pem",
    options: [],
    maxArgs: 1,
    run: async ({ positionals }) => (await import("./keys.js")).pubkey(positionals[0]),
  },
  {
    name: "limits",
    usage: "limits show|reset ID [--address] [--admin HOST:PORT] [--config FILE] [--json]",
    summary: "read or reset a client's counters through the admin API",
    help: "show prints the counters as a table, reset resets them (for every replica on Redis).\n--address               ID is a client address, folded as the anonymous plan counts it\n--admin HOST:PORT       the admin listener, or its URL (https://...); default: admin_listen\n                        of --config FILE, else $GATEHOUSE_ADMIN_URL, else 127.0.0.1:9901\n--config FILE, -c FILE  find admin_listen and admin_token_env in gatehouse's config file\n--json                  show: print the admin API's JSON instead of a table\nThe admin token comes from $GATEHOUSE_ADMIN_TOKEN, else from the variable admin_token_env\nnames in --config FILE.",
    options: ["address", "admin", "config", "json"],
    maxArgs: 2,
    run: async (input) => (await import("./limits.js")).limitsCommand(input),
  },
  {
    name: "version",
    usage: "version",
    summary: "print gatehouse's version (also --version)",
    help: "Prints the version alone, such as 1.2.3.",
    options: [],
    maxArgs: 0,
    run: async () => {
      const { packageVersion } = await import("../admin/version.js");
      process.stdout.write(`${packageVersion()}\n`);
      return 0;
    },
  },
  {
    name: "help",
    usage: "help [COMMAND]",
    summary: "print this help, or a command's (also --help)",
    help: "gatehouse COMMAND --help prints the same.",
    options: [],
    maxArgs: 1,
    run: async ({ positionals }) => help(positionals[0]),
  },
];

/** The config file: --config, else $GATEHOUSE_CONFIG when set and not empty, else the default. */
function configPath(values: CommandInput["values"], env: NodeJS.ProcessEnv): string {
  const given = values.config;
  return typeof given === "string" ? given : env.GATEHOUSE_CONFIG || "proxy.config.yaml";
}

/** The command called `name`. */
export function findCommand(name: string): Command | undefined {
  return COMMANDS.find((command) => command.name === name);
}

/** Every command's usage line and summary. */
export function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.usage.length));
  const lines = COMMANDS.map((c) => `  gatehouse ${c.usage.padEnd(width)}  ${c.summary}`);
  return `usage:\n${lines.join("\n")}\n\nExit codes: 0 success, 1 failure, 2 usage error.\n`;
}

/** `gatehouse help [COMMAND]`: 0, or 2 for a command that does not exist. */
export function help(name: string | undefined): number {
  if (name === undefined) {
    process.stdout.write(usage());
    return 0;
  }
  const command = findCommand(name);
  if (command === undefined) {
    process.stderr.write(`gatehouse: no command ${JSON.stringify(name)}\n${usage()}`);
    return 2;
  }
  process.stdout.write(commandHelp(command));
  return 0;
}

/** The usage line, summary and help of `command`. */
export function commandHelp(command: Command): string {
  return `usage: gatehouse ${command.usage}\n\n${command.summary}.\n${command.help}\n`;
}
