/**
 * The `limits.redis` section compiled for the connection: passwords read from the environment,
 * the CA bundle read from its file, node addresses parsed, and a connection key that tells two
 * settings apart exactly when they would connect differently.
 */
import { createHash } from "node:crypto";
import { durationMs } from "./duration.js";
import { DEFAULT_REDIS_URL } from "./redis-schema.js";
import type { FileConfig } from "./schema.js";
import type { BuildProblem } from "./problem.js";
import type { FilesRead } from "./named-files.js";
import { readPem, unsetVariable } from "./environment.js";
import type { RedisNode, RedisSettings, RedisTopology } from "../limits/plans.js";

type RedisConfig = FileConfig["limits"]["redis"];

/** What compiling the Redis settings may use. */
export interface RedisBuildContext {
  readonly baseDir: string;
  readonly env: NodeJS.ProcessEnv;
  readonly problems: BuildProblem[];
  /** Where the CA file is recorded when it is read. */
  readonly read: FilesRead;
}

const SENTINEL_PORT = 26379;
const REDIS_PORT = 6379;

function node(url: string, defaultPort: number): RedisNode {
  const { hostname, port } = new URL(url);
  // IPv6 hosts come bracketed from the URL; sockets want them bare.
  return { host: hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(port || defaultPort) };
}

function topology(redis: RedisConfig, sentinelPassword: string | undefined): RedisTopology {
  if (redis.cluster.length > 0) {
    return { kind: "cluster", nodes: redis.cluster.map((url) => node(url, REDIS_PORT)) };
  }
  const { sentinel } = redis;
  if (sentinel.nodes.length > 0) {
    return {
      kind: "sentinel",
      masterName: sentinel.master_name,
      nodes: sentinel.nodes.map((url) => node(url, SENTINEL_PORT)),
      password: sentinelPassword,
    };
  }
  return { kind: "server", url: redis.url ?? DEFAULT_REDIS_URL };
}

/** Where Redis is, as logs show it: URLs without their password. */
function display(redis: RedisConfig, where: RedisTopology): string {
  const user = redis.username === "" ? "" : ` as ${redis.username}`;
  if (where.kind === "server") {
    const url = new URL(where.url);
    if (url.password !== "") url.password = "***";
    return `${url.href}${user}`;
  }
  if (where.kind === "cluster") return `cluster ${redis.cluster.join(",")}${user}`;
  return `sentinel ${where.masterName} at ${redis.sentinel.nodes.join(",")}${user}`;
}

// The value of a password variable; unset or empty is a problem at the key naming it.
function secret(
  name: string,
  path: readonly PropertyKey[],
  context: RedisBuildContext,
): string | undefined {
  if (name === "") return undefined;
  const unset = unsetVariable(context.env, name, path);
  if (unset !== undefined) context.problems.push(unset);
  return context.env[name];
}

/** Compiles `limits.redis`; a problem (an unset variable, an unreadable CA file) is pushed. */
export async function compileRedis(
  redis: RedisConfig,
  context: RedisBuildContext,
): Promise<RedisSettings> {
  const base = ["limits", "redis"];
  const password = secret(redis.password_env, [...base, "password_env"], context);
  const sentinelPassword = secret(
    redis.sentinel.password_env,
    [...base, "sentinel", "password_env"],
    context,
  );
  const where = topology(redis, sentinelPassword);
  const urls = [redis.url ?? DEFAULT_REDIS_URL, ...redis.cluster, ...redis.sentinel.nodes];
  const { ca_file: caFile, server_name: serverName } = redis.tls;
  const ca =
    caFile === "" ? undefined : await readPem(context, caFile, [...base, "tls", "ca_file"]);
  const tls = urls.some((url) => url.startsWith("rediss://"))
    ? { ca, servername: serverName === "" ? undefined : serverName }
    : undefined;
  const username = redis.username === "" ? undefined : redis.username;
  const timeoutMs = durationMs(redis.timeout);
  // A digest, so that the key can be compared and kept without holding any secret.
  const connectionKey = createHash("sha256")
    .update(JSON.stringify([where, username, password, tls, timeoutMs]))
    .digest("hex");
  return {
    topology: where,
    username,
    password,
    tls,
    connectionKey,
    display: display(redis, where),
    keyPrefix: redis.key_prefix,
    timeoutMs,
    onOutage: redis.on_outage,
  };
}
