/**
 * The configuration in force as `GET /config` shows it: every key of the schema, with the value
 * in force (a default as the code computes it, an alternative not used as null), less what could
 * let a reader in. Variable names (`secret_env`) and file paths (`key_file`) stay, since they tell
 * an operator where a secret comes from without telling the secret.
 */
import { fileJsonSchema } from "../config/json-schema.js";
import { DEFAULT_REDIS_URL } from "../config/redis-schema.js";
import type { Snapshot } from "../config/snapshot.js";

// Keys whose value is a credential or a credential's hash, at any depth.
const CREDENTIAL_KEYS = new Set(["secret_hash", "secret", "password", "token"]);

// A URL's password (redis://:PASSWORD@host) is left out; the rest of the URL is shown.
function withoutPassword(value: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(value)) return value;
  try {
    const url = new URL(value);
    if (url.password === "") return value;
    url.password = "";
    return url.href;
  } catch {
    return value;
  }
}

function redact(value: unknown): unknown {
  if (typeof value === "string") return withoutPassword(value);
  if (Array.isArray(value)) return value.map(redact);
  if (value !== null && typeof value === "object") {
    const shown: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      if (!CREDENTIAL_KEYS.has(key)) shown[key] = redact(child);
    }
    return shown;
  }
  return value;
}

/** The part of a JSON Schema this view reads: objects, arrays and records. */
interface Shape {
  readonly properties?: Record<string, Shape>;
  readonly items?: Shape;
  readonly additionalProperties?: Shape | boolean;
}

// The same for every gatehouse in the process: made at the first GET /config, then kept.
let schema: Shape | undefined;

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value);

// `value` with every key `shape` names, in the schema's order; a key the file left without a
// default is null.
function everyKey(shape: Shape, value: unknown): unknown {
  if (Array.isArray(value))
    return shape.items === undefined ? value : value.map((v) => everyKey(shape.items as Shape, v));
  if (!isObject(value)) return value;
  const { properties, additionalProperties } = shape;
  const shown: Record<string, unknown> = {};
  if (properties !== undefined) {
    for (const [key, child] of Object.entries(properties))
      shown[key] = everyKey(child, value[key] ?? null);
  }
  for (const [key, child] of Object.entries(value)) {
    if (key in shown) continue;
    shown[key] =
      typeof additionalProperties === "object" ? everyKey(additionalProperties, child) : child;
  }
  return shown;
}

// The defaults the schema cannot state, as the code computes them (docs/configuration.md).
function computedDefaults(config: Snapshot): unknown {
  const { file } = config;
  const { redis } = file.limits;
  const oneServer = redis.cluster.length === 0 && redis.sentinel.nodes.length === 0;
  const { anonymous } = file.plans;
  return {
    ...file,
    tokens: { ...file.tokens, verify_concurrency: config.tokens.verifyConcurrency },
    clients: file.clients.map((client) => ({
      ...client,
      plan: client.plan ?? (Object.hasOwn(file.plans, "default") ? "default" : undefined),
      default_scopes: client.default_scopes ?? client.scopes,
      resources: client.resources ?? [file.tokens.audience],
    })),
    // The anonymous plan's `connections` has a default the other plans' have not.
    plans:
      anonymous === undefined
        ? file.plans
        : {
            ...file.plans,
            anonymous: { ...anonymous, connections: config.limits.anonymous?.connections },
          },
    limits: {
      ...file.limits,
      redis: { ...redis, url: redis.url ?? (oneServer ? DEFAULT_REDIS_URL : undefined) },
    },
  };
}

/** The configuration in force without credentials: what `GET /config` answers. */
export function publicConfig(config: Snapshot): unknown {
  schema ??= fileJsonSchema() as Shape;
  return redact(everyKey(schema, computedDefaults(config)));
}
