/**
 * `gatehouse token check [--config FILE] [--token TOKEN] [--json]`: what gatehouse, running with
 * the file, would decide for a bearer token, and why. Exit codes: 0 accepted, 1 refused (or a
 * file with problems), 2 usage. The token is read from stdin unless --token gives it; it is never
 * printed, nor is its signature.
 */
import { ConfigError } from "../config/load.js";
import { loadSnapshot } from "../config/snapshot.js";
import { configErrorText } from "./serve.js";
import { reportToken, type RouteFact, type TimeClaim, type TokenReport } from "./token-report.js";
import { readUnseen } from "./unseen.js";
import type { Verdict } from "./token-refusals.js";

/** The command's checked options and arguments (`check`). */
export interface TokenCheckInput {
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  readonly positionals: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  /** The command's usage and help, printed after a usage error. */
  readonly help: string;
}

/** The most read from stdin: far beyond any bearer token gatehouse reads. */
const MAX_INPUT_BYTES = 64 * 1024;

class TooMuchInput extends Error {}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_INPUT_BYTES) throw new TooMuchInput();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

// On a terminal the token is pasted unseen, as a password is typed: it is a credential, and the
// terminal's scrollback is no place for it.
async function pastedToken(): Promise<string> {
  const token = await readUnseen("token: ");
  process.stderr.write("\n");
  return token;
}

// The token as an Authorization header carries it, or as a tool prints it: surrounding
// whitespace and a leading `Bearer ` (any case, RFC 9110 §11.1) are not part of it.
function bareToken(text: string): string {
  return text.trim().replace(/^bearer(?: +|$)/i, "");
}

// Control characters and line separators in a claim are shown escaped: a token is untrusted
// input, and a terminal would act on them.
// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

function shown(value: unknown): string {
  if (typeof value === "string") return printable(value);
  if (value === null || value === undefined) return "(none)";
  if (typeof value === "object" && "iso" in value) {
    const { iso, relative } = value as TimeClaim;
    return `${iso} (${relative})`;
  }
  return printable(JSON.stringify(value));
}

// The widest label, "may not call", and two spaces.
const LABEL_WIDTH = 14;

function line(label: string, value: string): string {
  return `${label.padEnd(LABEL_WIDTH)}${value}\n`;
}

function routeText(route: RouteFact): string {
  const target = `${route.methods.join(",")} ${route.path}`;
  const binding = route.needsBinding ? "needs a DPoP-bound token" : "";
  if (route.needs === null || route.missing.length === 0) {
    return binding === "" ? target : `${target}: ${binding}`;
  }
  const needed = `${route.needs.every ? "needs" : "needs one of"} ${route.missing.join(" ")}`;
  return `${target}: ${binding === "" ? needed : `${binding}; ${needed}`}`;
}

function verdictLines(verdict: Verdict): string {
  switch (verdict.outcome) {
    case "accepted":
      return line("verdict", "accepted");
    case "unchecked":
      return line("verdict", `not checked: ${verdict.message}`);
    case "refused":
      return (
        line("verdict", `refused (${verdict.reason}): ${printable(verdict.message)}`) +
        line("answer", `${verdict.status} ${verdict.error}`)
      );
  }
}

// What an accepted token is held to and may do: its plan, its scopes, the bearer routes.
function grantLines({ plan, scopes, routes }: TokenReport): string {
  const dryRun = plan?.dryRun === true ? " (dry run: counted, never refused)" : "";
  let text = line(
    "plan",
    plan === null ? "none: not limited" : `${plan.name}: ${plan.limits.join(", ")}${dryRun}`,
  );
  text += line("scopes", scopes?.length ? printable(scopes.join(" ")) : "none");
  if (routes?.length === 0) text += line("routes", "no route takes a bearer token");
  for (const route of routes ?? []) {
    text += line(route.allowed ? "may call" : "may not call", printable(routeText(route)));
  }
  return text;
}

/** The report as text, one fact a line. */
export function reportText(configPath: string, report: TokenReport): string {
  let text = line("config", configPath);
  if (report.notJwt !== null) {
    text += line(
      "token",
      `not a JWT (${printable(report.notJwt)}); gatehouse verifies JWT access tokens only`,
    );
  }
  if (report.header !== null) {
    const { alg, typ, kid } = report.header;
    text += line("header", `alg ${shown(alg)}, typ ${shown(typ)}, kid ${shown(kid)}`);
  }
  for (const [name, value] of Object.entries(report.claims ?? {})) {
    text += line(name, name === "cnf" ? (value === true ? "present" : "absent") : shown(value));
  }
  const { issuer } = report;
  let expects = "";
  if (issuer.audiences !== null && issuer.algorithms !== null) {
    expects = `; aud must hold ${issuer.audiences.map(printable).join(" or ")}; alg ${issuer.algorithms.join(", ")}`;
  }
  text += line("issuer", `${printable(issuer.note)}${expects}`);
  text += line("key", printable(report.key.note));
  text += verdictLines(report.verdict);
  if (report.client !== null) {
    const { client } = report;
    const listed = client.listed ? "listed in clients" : "not listed in clients";
    const id = printable(client.id);
    text += line(
      "client",
      `${id} (issuer ${client.issuer}; ${listed}; gatehouse limits show ${printable(client.key)})`,
    );
  }
  if (report.binding !== null) {
    text += line(
      "binding",
      `DPoP key ${report.binding}: each request needs the DPoP scheme and a proof signed by it`,
    );
  }
  if (report.revocation !== null) text += line("revocation", report.revocation.note);
  if (report.verdict.outcome === "accepted") text += grantLines(report);
  return text;
}

/** Runs `gatehouse token check`; returns the exit code. */
export async function tokenCommand(input: TokenCheckInput, configPath: string): Promise<number> {
  const { values, positionals, env, help } = input;
  const usage = (message: string): number => {
    process.stderr.write(`gatehouse: ${message}\n${help}`);
    return 2;
  };
  if (positionals[0] !== "check") {
    return usage("token takes check, then the token on stdin or in --token TOKEN");
  }
  let text: string;
  if (typeof values.token === "string") text = values.token;
  else if (process.stdin.isTTY) {
    try {
      text = await pastedToken();
    } catch {
      process.stderr.write("\ngatehouse: cancelled\n");
      return 1;
    }
  } else {
    try {
      text = await readStdin();
    } catch (error) {
      if (!(error instanceof TooMuchInput)) throw error;
      return usage(`stdin holds over ${MAX_INPUT_BYTES} bytes; give it one token`);
    }
  }
  const token = bareToken(text);
  if (token === "") return usage("no token: give it on stdin or in --token TOKEN");
  let config;
  try {
    config = await loadSnapshot(configPath, { env });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(configErrorText(error));
    return 1;
  }
  const report = await reportToken(config, token, Date.now());
  process.stdout.write(
    values.json === true
      ? `${JSON.stringify({ config: configPath, ...report }, null, 2)}\n`
      : reportText(configPath, report),
  );
  return report.verdict.outcome === "accepted" ? 0 : 1;
}
