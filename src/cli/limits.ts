/**
 * `gatehouse limits show|reset ID [--address] [--admin HOST:PORT|URL] [--config FILE] [--json]`:
 * the admin API's limits endpoints from the command line, for support desks and scripts. Exit
 * codes: 0 success, 1 failure (unknown client, admin unreachable, refused, a config that cannot
 * be read), 2 usage.
 */
import type { FileConfig } from "../config/schema.js";

/** The command's checked options and arguments (`show|reset`, then the id). */
export interface LimitsInput {
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly positionals: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** The command's usage and help, printed after a usage error. */
  readonly help: string;
}

/** Where the command writes. */
export interface Output {
  write(text: string): unknown;
}

interface LimitRow {
  readonly name: string;
  readonly kind: string;
  readonly limit: number;
  readonly remaining: number;
  readonly reset: number;
  readonly window: string;
}

/** The limits as an aligned table. */
export function limitsTable(body: Record<string, unknown>): string {
  const who =
    body.client === undefined ? `address ${String(body.address)}` : `client ${String(body.client)}`;
  const rows = (body.limits as LimitRow[]).map((row) => [
    row.name,
    row.kind,
    String(row.limit),
    String(row.remaining),
    `${row.reset}s`,
    row.window,
  ]);
  const plan = body.plan === null ? "none (unlimited)" : String(body.plan);
  if (rows.length === 0) return `${who}  plan ${plan}\nno limits\n`;
  const table = [["NAME", "KIND", "LIMIT", "REMAINING", "RESET", "WINDOW"], ...rows];
  const widths = table[0]!.map((_, column) =>
    Math.max(...table.map((row) => (row[column] as string).length)),
  );
  const lines = table.map((row) =>
    row
      .map((cell, column) => cell.padEnd(widths[column] as number))
      .join("  ")
      .trimEnd(),
  );
  return `${who}  plan ${plan}\n${lines.join("\n")}\n`;
}

// Why fetch failed: undici says only "fetch failed" and keeps the reason (ECONNREFUSED,
// ENOTFOUND, a TLS error) in `cause`.
function unreachableCause(error: unknown): string {
  if (error instanceof Error && error.name === "TimeoutError") return "no answer within 10 s";
  const cause = (error as { cause?: NodeJS.ErrnoException }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message;
}

/** The admin token the command sends, and the variable it came from (`$NAME`). */
interface AdminToken {
  readonly value: string | undefined;
  readonly from: string;
}

// What to do about a refusal the admin API explains by its status and code.
function refusalAdvice(
  status: number,
  code: string | undefined,
  token: AdminToken,
  url: URL,
): string {
  if (status === 401 && token.from === "$GATEHOUSE_ADMIN_TOKEN") {
    return token.value === undefined
      ? "set $GATEHOUSE_ADMIN_TOKEN to the admin token (the value of the variable admin_token_env names)"
      : "$GATEHOUSE_ADMIN_TOKEN is not the admin token: give it the value of the variable admin_token_env names";
  }
  if (status === 401) {
    return token.value === undefined
      ? `set ${token.from}, which admin_token_env names in the config, to the admin token (or set $GATEHOUSE_ADMIN_TOKEN)`
      : `${token.from} here is not the admin token of the gatehouse at ${url.host}: give it the value that gatehouse was started with (or set $GATEHOUSE_ADMIN_TOKEN)`;
  }
  if (status === 403 && code === "admin_token_required") {
    return "admin_listen is reachable from other machines, so resets need an admin token: set admin_token_env in the config, then $GATEHOUSE_ADMIN_TOKEN here";
  }
  // RFC 9110 §15.5.20: the server does not answer for the Host the request named.
  if (status === 421) {
    return `the admin API does not answer to the name ${url.hostname}: use --admin with an IP literal, such as --admin 127.0.0.1:${url.port || "9901"}, or list the name in admin_hosts`;
  }
  return "";
}

/**
 * The admin listener named by `--admin` or `$GATEHOUSE_ADMIN_URL`: a URL, or HOST:PORT (an IPv6
 * address in brackets) for http; undefined when it is neither.
 */
function adminBase(text: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(text) ? text : `http://${text}`);
  } catch {
    return undefined;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url : undefined;
}

/** What a config file says of the admin API: where it listens and the token's variable. */
interface ConfigAdmin {
  readonly url: URL;
  readonly tokenVariable: string;
}

// The admin listener of a validated file, and its token's variable; an address on every
// interface is reached on loopback.
function configAdmin(file: Pick<FileConfig, "admin_listen" | "admin_token_env">): ConfigAdmin {
  const url = new URL(`http://${file.admin_listen}`);
  if (url.hostname === "0.0.0.0") url.hostname = "127.0.0.1";
  if (url.hostname === "[::]") url.hostname = "[::1]";
  return { url, tokenVariable: file.admin_token_env };
}

/** Where the admin API is and the token it is sent, or the exit code when they cannot be known. */
async function adminApi(
  values: LimitsInput["values"],
  env: NodeJS.ProcessEnv,
  err: Output,
): Promise<{ readonly base: URL; readonly token: AdminToken } | number> {
  let fromConfig: ConfigAdmin | undefined;
  if (typeof values.config === "string") {
    // Read and validated as a start reads it, so that --config finds what gatehouse listens on.
    const { ConfigError, parseConfigText, readConfigText } = await import("../config/load.js");
    try {
      fromConfig = configAdmin(
        parseConfigText(await readConfigText(values.config), values.config).file,
      );
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      err.write(`${error.message}\n`);
      return 1;
    }
  }
  // What the command line names wins over the config, and the config over the environment.
  const [given, option] =
    typeof values.admin === "string"
      ? [values.admin, "--admin"]
      : fromConfig !== undefined
        ? [fromConfig.url.href, "admin_listen"]
        : [env.GATEHOUSE_ADMIN_URL || "127.0.0.1:9901", "$GATEHOUSE_ADMIN_URL"];
  const base = adminBase(given);
  if (base === undefined) {
    err.write(
      `gatehouse limits: ${option} ${JSON.stringify(given)} is neither HOST:PORT nor an http(s) URL, such as 127.0.0.1:9901\n`,
    );
    return 2;
  }
  if (option === "admin_listen" && base.port === "0") {
    err.write(
      `gatehouse limits: admin_listen in ${String(values.config)} has port 0, chosen at start: name the listener with --admin HOST:PORT\n`,
    );
    return 1;
  }
  // $GATEHOUSE_ADMIN_TOKEN, when set, wins over the variable the config names.
  const variable = env.GATEHOUSE_ADMIN_TOKEN
    ? "GATEHOUSE_ADMIN_TOKEN"
    : fromConfig?.tokenVariable || "GATEHOUSE_ADMIN_TOKEN";
  return { base, token: { value: env[variable] || undefined, from: `$${variable}` } };
}

/** Runs `gatehouse limits show|reset ID`; returns the exit code. */
export async function limitsCommand(
  input: LimitsInput,
  out: Output = process.stdout,
  err: Output = process.stderr,
): Promise<number> {
  const { values, positionals, env, help } = input;
  const [action, id] = positionals;
  if ((action !== "show" && action !== "reset") || id === undefined) {
    const wanted =
      action === "show" || action === "reset"
        ? `limits ${action} needs a client id, or an address with --address`
        : "limits takes show or reset, then a client id or an address";
    err.write(`gatehouse: ${wanted}\n${help}`);
    return 2;
  }
  if (action === "reset" && values.json === true) {
    err.write("gatehouse: --json is an option of limits show\n");
    return 2;
  }
  const admin = await adminApi(values, env, err);
  if (typeof admin === "number") return admin;
  const { base, token } = admin;
  const url = new URL(
    `/limits/${values.address === true ? "addresses" : "clients"}/${encodeURIComponent(id)}`,
    base,
  );
  let response: Response;
  try {
    response = await fetch(url, {
      method: action === "show" ? "GET" : "DELETE",
      headers: token.value === undefined ? {} : { authorization: `Bearer ${token.value}` },
      signal: AbortSignal.timeout(10_000),
    });
  } catch (error) {
    err.write(
      `gatehouse limits: cannot reach the admin API at ${url.origin} (${unreachableCause(error)}); ` +
        "point to it with --admin HOST:PORT, --config FILE or $GATEHOUSE_ADMIN_URL\n",
    );
    return 1;
  }
  const text = await response.text();
  if (!response.ok) {
    let message = text;
    let code: string | undefined;
    try {
      const body = JSON.parse(text) as { error?: string; message?: string };
      code = body.error;
      message = `${body.error ?? response.status}: ${body.message ?? ""}`;
    } catch {
      // Not JSON: the text as it came.
    }
    const advice = refusalAdvice(response.status, code, token, url);
    err.write(
      `gatehouse limits: ${response.status} ${message}${advice === "" ? "" : `\n${advice}`}\n`,
    );
    return 1;
  }
  if (action === "reset") {
    out.write(`reset the counters of ${values.address === true ? "address" : "client"} ${id}\n`);
    return 0;
  }
  const body = JSON.parse(text) as Record<string, unknown>;
  out.write(values.json === true ? `${JSON.stringify(body, null, 2)}\n` : limitsTable(body));
  return 0;
}
