/**
 * `gatehouse limits show|reset ID [--address] [--admin URL] [--json]`: the admin API's limits
 * endpoints from the command line, for support desks and scripts. Exit codes: 0 success, 1
 * failure (unknown client, admin unreachable, refused), 2 usage.
 */

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

// What to do about a refusal the admin API explains by its status and code.
function refusalAdvice(
  status: number,
  code: string | undefined,
  token: string | undefined,
  url: URL,
): string {
  if (status === 401) {
    return token === undefined || token === ""
      ? "set $GATEHOUSE_ADMIN_TOKEN to the admin token (the value of the variable admin_token_env names)"
      : "$GATEHOUSE_ADMIN_TOKEN is not the admin token: give it the value of the variable admin_token_env names";
  }
  if (status === 403 && code === "admin_token_required") {
    return "admin_listen is reachable from other machines, so resets need an admin token: set admin_token_env in the config, then $GATEHOUSE_ADMIN_TOKEN here";
  }
  // RFC 9110 §15.5.20: the server does not answer for the Host the request named.
  if (status === 421) {
    return `the admin API does not answer to the name ${url.hostname}: use --admin with an IP literal, such as --admin http://127.0.0.1:${url.port || "9901"}, or list the name in admin_hosts`;
  }
  return "";
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
  const base =
    typeof values.admin === "string"
      ? values.admin
      : env.GATEHOUSE_ADMIN_URL || "http://127.0.0.1:9901";
  let url: URL;
  try {
    url = new URL(
      `/limits/${values.address === true ? "addresses" : "clients"}/${encodeURIComponent(id)}`,
      base,
    );
  } catch {
    err.write(`gatehouse limits: --admin ${JSON.stringify(base)} is not a URL\n`);
    return 2;
  }
  const token = env.GATEHOUSE_ADMIN_TOKEN;
  let response: Response;
  try {
    response = await fetch(url, {
      method: action === "show" ? "GET" : "DELETE",
      headers: token === undefined || token === "" ? {} : { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(10_000),
    });
  } catch (error) {
    err.write(
      `gatehouse limits: cannot reach the admin API at ${url.origin} (${unreachableCause(error)}); ` +
        "point to it with --admin URL or $GATEHOUSE_ADMIN_URL\n",
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
