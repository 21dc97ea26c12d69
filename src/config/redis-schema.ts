/**
 * The `limits.redis` section: where Redis is (one server, a Cluster or Sentinel), how gatehouse
 * authenticates and verifies it, and what an outage does. Kept apart from the rest of the schema
 * so that the rules about the three topologies sit together.
 */
import { z } from "zod";
import { problem, type Ctx } from "./cross-checks.js";
import { absoluteUrl, noQuery } from "./schema-checks.js";

/** Where an omitted `url` points, when neither `cluster` nor `sentinel` is set. */
export const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

const REDIS_SCHEME = /^rediss?:\/\//;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

// A query may not be in a Redis URL: ioredis would read options from it and override the bounds
// that the limits.redis keys set. A password may, for one server (older configurations).
function checkServerUrl(value: string, ctx: Ctx): void {
  const url = absoluteUrl(value, ctx, DEFAULT_REDIS_URL);
  if (url !== undefined) noQuery(url, ctx);
}

// A Cluster or Sentinel node is an address: credentials go in username and password_env, once
// for every node, and neither a Cluster nor a Sentinel has databases to choose.
function checkNodeUrl(value: string, ctx: Ctx): void {
  const url = absoluteUrl(value, ctx, "redis://10.0.0.1:6379");
  if (url === undefined) return;
  if (url.username !== "" || url.password !== "") {
    problem(ctx, [], "must not contain a user name or password; use username and password_env");
  } else if (url.search !== "" || url.hash !== "" || !["", "/"].includes(url.pathname)) {
    problem(ctx, [], "must be only redis://HOST:PORT (or rediss:// for TLS)");
  }
}

const redisUrl = z
  .string({ error: "must be a redis:// or rediss:// URL" })
  .regex(REDIS_SCHEME, { error: "must be a redis:// or rediss:// URL" });

const nodeList = (description: string) =>
  z.array(redisUrl.superRefine(checkNodeUrl)).default([]).describe(description);

const envName = (description: string) =>
  z
    .string()
    .refine((value) => value === "" || ENV_NAME.test(value), {
      error: "must be an environment variable name",
    })
    .default("")
    .describe(description);

interface RedisShape {
  url?: string | undefined;
  cluster: readonly string[];
  sentinel: { master_name: string; nodes: readonly string[]; password_env: string };
  username: string;
  password_env: string;
  tls: { ca_file: string; server_name: string };
}

const isTls = (url: string): boolean => url.startsWith("rediss://");

// Exactly one place says where Redis is, and TLS is used for all of it or none of it.
function checkTopology(redis: RedisShape, ctx: Ctx): void {
  const given: Array<[PropertyKey[], readonly string[]]> = [];
  if (redis.url !== undefined) given.push([["url"], [redis.url]]);
  if (redis.cluster.length > 0) given.push([["cluster"], redis.cluster]);
  if (redis.sentinel.nodes.length > 0) given.push([["sentinel", "nodes"], redis.sentinel.nodes]);
  for (const [path] of given.slice(1)) {
    problem(
      ctx,
      path,
      `cannot be given with ${given[0]?.[0].join(".")}: exactly one of url, cluster or sentinel.nodes says where Redis is`,
    );
  }
  const { sentinel } = redis;
  if (sentinel.nodes.length > 0 && sentinel.master_name === "") {
    problem(ctx, ["sentinel", "master_name"], "is required with sentinel.nodes, such as mymaster");
  }
  if (
    sentinel.nodes.length === 0 &&
    (sentinel.master_name !== "" || sentinel.password_env !== "")
  ) {
    problem(
      ctx,
      ["sentinel", "nodes"],
      "must list the Sentinels, such as [redis://10.0.0.5:26379]",
    );
  }
  const [where, urls] = given[0] ?? [["url"], [DEFAULT_REDIS_URL]];
  const tls = urls.filter(isTls).length;
  if (tls > 0 && tls < urls.length) {
    problem(ctx, where, "mixes redis:// and rediss://: TLS is used for every node or for none");
  } else if (tls === 0 && (redis.tls.ca_file !== "" || redis.tls.server_name !== "")) {
    problem(ctx, ["tls"], "needs rediss:// URLs: a redis:// URL connects without TLS");
  }
  const own = URL.parse(redis.url ?? DEFAULT_REDIS_URL);
  const credentials = own !== null && (own.username !== "" || own.password !== "");
  if (credentials && (redis.username !== "" || redis.password_env !== "")) {
    problem(ctx, ["url"], "must not contain a user name or password with username or password_env");
  }
}

/** The `limits.redis` section; `timeout` is the schema's own duration type. */
export function redisSchema<Timeout extends z.ZodType<string, string | undefined>>(
  timeout: Timeout,
) {
  return z
    .strictObject({
      url: redisUrl
        .superRefine(checkServerUrl)
        .optional()
        .describe(
          `One Redis server (rediss:// for TLS); ${DEFAULT_REDIS_URL} when neither cluster nor sentinel is set.`,
        ),
      cluster: nodeList("Seed nodes of a Redis Cluster, such as redis://10.0.0.1:6379."),
      sentinel: z
        .strictObject({
          master_name: z.string().default("").describe("The name Sentinel knows the primary by."),
          nodes: nodeList("The Sentinels, such as redis://10.0.0.5:26379."),
          password_env: envName("An environment variable holding the Sentinels' own password."),
        })
        .prefault({})
        .describe("Redis behind Sentinel: the primary is whichever the Sentinels name."),
      username: z.string().default("").describe("The Redis ACL user."),
      password_env: envName("An environment variable holding the Redis password."),
      tls: z
        .strictObject({
          ca_file: z
            .string()
            .default("")
            .describe("PEM bundle verifying the servers, relative to the config file."),
          server_name: z
            .string()
            .default("")
            .describe("The name on the servers' certificates, when it differs from the host."),
        })
        .prefault({})
        .describe("Verification of rediss:// connections, every node and Sentinel included."),
      key_prefix: z
        .string()
        .refine((prefix) => !/[{}]/.test(prefix), {
          error:
            'must not contain "{" or "}": Redis Cluster would take a brace for the hash tag that keeps all of a client\'s keys on one node',
        })
        .default("gatehouse:")
        .describe("Prefix of every Redis key; no braces, which Redis Cluster reads as a hash tag."),
      timeout,
      on_outage: z
        .enum(["local", "open", "closed"], { error: "must be local, open or closed" })
        .default("local")
        .describe("local: per-replica memory limits; open: allow; closed: 503."),
    })
    .superRefine(checkTopology);
}
