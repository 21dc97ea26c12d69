/**
 * From a validated file to one frozen snapshot: secrets resolved, keys imported, routes compiled,
 * durations in milliseconds. This is the only step of loading with I/O besides reading the file.
 */
import type { BuildProblem } from "./problem.js";
import type { UpstreamSettings } from "../upstream/settings.js";
import { dirname, resolve } from "node:path";
import {
  ConfigError,
  locateProblems,
  parseConfigText,
  readConfigText,
  withKeyFileProblems,
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
import { createEphemeralKeys, type EphemeralKeys } from "../tokens/keys.js";
import { createPlainSecrets, type PlainSecrets } from "../tokens/secrets.js";
import { compileTokens, type TokenSettings } from "../tokens/settings.js";
import { compileRedis } from "./redis.js";
import {
  digestNow,
  fileHash,
  identityOf,
  type FileDigests,
  type FilesRead,
} from "./named-files.js";
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
  /** The config file and every file it names, by absolute path, with a digest of each. */
  readonly files: FileDigests;
  /** One digest of `files`, hex: equal means unchanged. */
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
  /**
   * Records each file read, even when the reading fails: a reload that fails tells one bad
   * content from another by them.
   */
  readonly read?: FilesRead;
}

/** Parses and validates config text, throwing ConfigError, on this thread or another. */
export type ParseConfig = (
  text: string,
  name: string,
  around: Surroundings,
) => Promise<ParsedConfig>;

/** Reads, validates and builds the snapshot for `path`; throws ConfigError listing every problem. */
export async function loadSnapshot(path: string, options: BuildOptions): Promise<Snapshot> {
  const read = options.read ?? new Map<string, string>();
  let text: string;
  try {
    text = await readConfigText(path);
  } catch (error) {
    // Recorded as the watch sees it, by the reason it cannot be read (a read that got no answer
    // is not waited for again: this one fails at once).
    read.set(resolve(path), await digestNow(resolve(path)));
    throw error;
  }
  const hash = fileHash(text);
  read.set(resolve(path), hash);
  const around = {
    env: options.env,
    baseDir: dirname(resolve(path)),
    withoutEnvironment: options.withoutEnvironment,
  };
  const parsed = await (options.parse ?? parseInline)(text, path, around).catch(
    async (error: unknown) => {
      throw error instanceof ConfigError ? await withKeyFileProblems(error, around) : error;
    },
  );
  return buildSnapshot(parsed, { ...options, source: path, hash, read });
}

/**
 * Builds a snapshot from a parsed file whose text hashes to `hash`; `read` already holds the
 * config file and receives each file it names.
 */
export async function buildSnapshot(
  parsed: ParsedConfig,
  options: BuildOptions & {
    readonly source: string;
    readonly hash: string;
    readonly read: FilesRead;
  },
): Promise<Snapshot> {
  const { file } = parsed;
  const found: BuildProblem[] = [];
  const baseDir = dirname(resolve(options.source));
  const { read } = options;
  const tokens = await compileTokens(file, {
    baseDir,
    read,
    env: options.env,
    ephemeralKeys: options.ephemeralKeys ?? createEphemeralKeys(),
    plainSecrets: options.plainSecrets ?? createPlainSecrets(),
    problems: found,
  });
  const redis =
    file.limits.store === "redis"
      ? await compileRedis(file.limits.redis, { baseDir, read, env: options.env, problems: found })
      : undefined;
  const snapshot: Snapshot = {
    file: deepFreeze(file),
    source: options.source,
    baseDir,
    hash: options.hash,
    files: new Map(read),
    identity: identityOf(read),
    listen: hostPort(file.listen),
    adminListen: hostPort(file.admin_listen),
    trustedProxies: file.trusted_proxies.length === 0 ? null : addressSet(file.trusted_proxies),
    upstream: {
      url: new URL(file.upstream.url),
      timeoutMs: durationMs(file.upstream.timeout),
      maxSockets: file.upstream.max_sockets,
      idleTimeoutMs: durationMs(file.upstream.idle_timeout),
      websocketIdleMs: durationMs(file.upstream.websocket.idle_timeout),
      websocketMaxConnections: file.upstream.websocket.max_connections,
      serverName: file.upstream.server_name === "" ? undefined : file.upstream.server_name,
      identityHeader: file.upstream.identity_header.toLowerCase(),
      scopesHeader: file.upstream.scopes_header.toLowerCase(),
      issuerHeader: file.upstream.issuer_header.toLowerCase(),
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
