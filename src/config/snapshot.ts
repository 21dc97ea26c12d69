/**
 * From a validated file to one frozen snapshot: secrets resolved, keys imported, routes compiled,
 * durations in milliseconds. This is the only step of loading with I/O besides reading the file.
 */
import type { BuildProblem } from "./problem.js";
import type { UpstreamSettings } from "../upstream/settings.js";
import { createHash } from "node:crypto";
import { dirname, resolve } from "node:path";
import {
  ConfigError,
  locateProblems,
  parseConfigText,
  readConfigText,
  type ConfigProblem,
  type ParsedConfig,
} from "./load.js";
import { addressSet, type AddressSet } from "../http/address-set.js";
import { durationMs } from "./duration.js";
import { reported, unsetVariable, type Surroundings } from "./environment.js";
import type { FileConfig } from "./schema.js";
import { compileRoutesInSlices, type RouteTable } from "../routes/table.js";
import { compileLimits, type LimitsSettings } from "../limits/plans.js";
import { compileLanguages, type LanguageSettings } from "../language/table.js";
import { createEphemeralKeys, type EphemeralKeys, type KeyRing } from "../tokens/keys.js";
import { createPlainSecrets, type PlainSecrets } from "../tokens/secrets.js";
import { compileTokens, type TokenSettings } from "../tokens/settings.js";
import { compileRedis } from "./redis.js";
import { tracesUrl, type TracingSettings } from "../tracing/settings.js";

/** A listening address. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** One loaded configuration; requests take it once and use it throughout. */
export interface Snapshot {
  readonly file: FileConfig;
  /** The config path as given on the command line. */
  readonly source: string;
  /** Relative paths in the file are resolved from here. */
  readonly baseDir: string;
  /** sha256 of the file's text, hex: `gatehouse_config_info`'s `hash` label. */
  readonly hash: string;
  /** sha256 of the file's text and the ids of the keys it names, hex: equal means unchanged. */
  readonly identity: string;
  readonly listen: HostPort;
  readonly adminListen: HostPort;
  /** null when no proxy is trusted. */
  readonly trustedProxies: AddressSet | null;
  readonly upstream: UpstreamSettings;
  readonly routes: RouteTable;
  /** Plans by client id, the anonymous plan, and the limits settings. */
  readonly limits: LimitsSettings;
  /** Lower-cased language tables for the language stage. */
  readonly languages: LanguageSettings;
  readonly tokens: TokenSettings;
  readonly health: { readonly liveness: string; readonly readiness: string };
  readonly shutdown: { readonly delayMs: number; readonly graceMs: number };
  readonly tracing: TracingSettings;
  /** The admin API's bearer token, from `admin_token_env`; undefined when none is set. */
  readonly adminToken: string | undefined;
  /** `admin_hosts`, lower-cased: host names compare without regard to case (RFC 4343). */
  readonly adminHosts: readonly string[];
  /** What the file gets wrong without being invalid, each at its line: printed, never refused. */
  readonly warnings: readonly ConfigProblem[];
}

/** What building a snapshot may read besides the file: the environment. */
export interface BuildOptions {
  readonly env: NodeJS.ProcessEnv;
  /** `check --no-env`: unset variables and missing files are not problems (Surroundings). */
  readonly withoutEnvironment?: boolean;
  /** Keys for configurations without one; made once per process so reloads keep tokens valid. */
  readonly ephemeralKeys?: EphemeralKeys;
  /** Derived `secret_env` secrets; made once per process so reloads do not derive them again. */
  readonly plainSecrets?: PlainSecrets;
  /** Parses and validates the text; by default on this thread. */
  readonly parse?: ParseConfig;
}

/** Parses and validates config text, throwing ConfigError, on this thread or another. */
export type ParseConfig = (
  text: string,
  name: string,
  around: Surroundings,
) => Promise<ParsedConfig>;

/** Reads, validates and builds the snapshot for `path`; throws ConfigError listing every problem. */
export async function loadSnapshot(path: string, options: BuildOptions): Promise<Snapshot> {
  const text = await readConfigText(path);
  const around = {
    env: options.env,
    baseDir: dirname(resolve(path)),
    withoutEnvironment: options.withoutEnvironment,
  };
  const parsed = await (options.parse ?? parseInline)(text, path, around);
  return buildSnapshot(parsed, { ...options, source: path, text });
}

/** Builds a snapshot from a parsed file. */
export async function buildSnapshot(
  parsed: ParsedConfig,
  options: BuildOptions & { readonly source: string; readonly text: string },
): Promise<Snapshot> {
  const { file } = parsed;
  const found: BuildProblem[] = [];
  const baseDir = dirname(resolve(options.source));
  const tokens = await compileTokens(file, {
    baseDir,
    env: options.env,
    ephemeralKeys: options.ephemeralKeys ?? createEphemeralKeys(),
    plainSecrets: options.plainSecrets ?? createPlainSecrets(),
    problems: found,
  });
  const redis =
    file.limits.store === "redis"
      ? await compileRedis(file.limits.redis, { baseDir, env: options.env, problems: found })
      : undefined;
  const snapshot: Snapshot = {
    file: deepFreeze(file),
    source: options.source,
    baseDir,
    hash: fileHash(options.text),
    identity: identity(options.text, tokens.keys),
    listen: hostPort(file.listen),
    adminListen: hostPort(file.admin_listen),
    trustedProxies: file.trusted_proxies.length === 0 ? null : addressSet(file.trusted_proxies),
    upstream: {
      url: new URL(file.upstream.url),
      timeoutMs: durationMs(file.upstream.timeout),
      maxSockets: file.upstream.max_sockets,
      idleTimeoutMs: durationMs(file.upstream.idle_timeout),
      identityHeader: file.upstream.identity_header.toLowerCase(),
      scopesHeader: file.upstream.scopes_header.toLowerCase(),
      forwardAuthorization: file.upstream.forward_authorization,
      keepUnderscoreHeaders: file.upstream.underscore_headers === "keep",
    },
    routes: await compileRoutesInSlices(file.routes),
    limits: compileLimits(file, baseDir, redis),
    languages: compileLanguages(file.languages),
    tokens,
    health: { liveness: file.health.liveness_path, readiness: file.health.readiness_path },
    shutdown: {
      delayMs: durationMs(file.shutdown.delay),
      graceMs: durationMs(file.shutdown.grace),
    },
    tracing: {
      tracesUrl: tracesUrl(file.tracing.otlp_endpoint),
      serviceName: file.tracing.service_name,
      sampleRatio: file.tracing.sample_ratio,
      timeoutMs: durationMs(file.tracing.timeout),
    },
    adminToken: adminToken(file.admin_token_env, options.env, found),
    adminHosts: file.admin_hosts.map((name) => name.toLowerCase()),
    warnings: parsed.warnings,
  };
  const problems = reported(found, options);
  if (problems.length > 0) {
    throw new ConfigError(options.source, locateProblems(parsed, problems));
  }
  return deepFreeze(snapshot);
}

// The admin token named by `admin_token_env`: a name whose variable is unset or empty is a
// problem, not an open admin API.
function adminToken(
  name: string,
  env: NodeJS.ProcessEnv,
  problems: BuildProblem[],
): string | undefined {
  if (name === "") return undefined;
  const unset = unsetVariable(env, name, ["admin_token_env"]);
  if (unset === undefined) return env[name];
  problems.push(unset);
  return undefined;
}

/** sha256 of a config file's text, hex. */
export function fileHash(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

// The file's bytes and the keys it names (by their RFC 7638 thumbprints): a key file replaced
// under an unchanged config is a change too.
function identity(text: string, keys: KeyRing): string {
  const hash = createHash("sha256").update(text);
  for (const kid of [keys.current.kid, ...[...keys.byKid.keys()].sort()]) hash.update(`\n${kid}`);
  return hash.digest("hex");
}

async function parseInline(
  text: string,
  name: string,
  around: Surroundings,
): Promise<ParsedConfig> {
  return parseConfigText(text, name, around);
}

/** Splits HOST:PORT (IPv6 in brackets); the schema has already checked the form. */
export function hostPort(text: string): HostPort {
  const colon = text.lastIndexOf(":");
  const host = text.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  return { host, port: Number(text.slice(colon + 1)) };
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    if (value instanceof URL || value instanceof RegExp) return value;
    if (ArrayBuffer.isView(value)) return value;
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
