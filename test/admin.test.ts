/** The admin listener's routes: /config without credentials, /version, and its error answers. */
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import t from "tap";
import { generateKeyPem } from "../src/tokens/keys.js";
import { hashSecret } from "../src/tokens/secrets.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { json, send } from "./helpers/client.js";
import { startUpstream } from "./helpers/upstream.js";
import { scrape } from "./helpers/metrics.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const CLIENT_SECRET = "admin-test-client-secret-41f0";
const ENV_SECRET = "admin-test-env-secret-9c3d5e";
const REDIS_PASSWORD = "redis-pa55word-7b1e";
const keyPem = await generateKeyPem("EdDSA");
const secretHash = await hashSecret(CLIENT_SECRET);

function withCredentials(extra = ""): string {
  return configFor(
    upstream.url,
    `tokens:
  signing:
    key_file: signing.pem
clients:
  - id: hashed-app
    secret_hash: "${secretHash}"
  - id: env-app
    secret_env: ADMIN_TEST_SECRET
limits:
  store: memory
  redis:
    url: redis://gatehouse:${REDIS_PASSWORD}@127.0.0.1:6379
routes:
  - path: /v1/items
    methods: [GET]
${extra}`,
  );
}

const gh = await startTestGatehouse(withCredentials(), {
  env: { ADMIN_TEST_SECRET: ENV_SECRET },
  files: { "signing.pem": keyPem },
});
t.teardown(() => gh.close());

t.test("GET /config shows the config in force with its defaults", async (t) => {
  const answer = await send(`${gh.adminUrl}/config`);
  t.equal(answer.status, 200);
  t.match(answer.headers["content-type"], /^application\/json/);
  const config = json(answer) as {
    upstream: { url: string; timeout: string };
    clients: Array<Record<string, unknown>>;
    tokens: { signing: Record<string, unknown> };
    limits: { redis: { url: string } };
    logging: { level: string };
  };
  t.equal(config.upstream.url, upstream.url);
  t.equal(config.upstream.timeout, "2s");
  t.equal(config.logging.level, "info", "defaults are filled in");
  const unused = {
    jwks_file: null,
    issuer: null,
    rate_limit: null,
    rate_limits: null,
    quota: null,
  };
  t.strictSame(config.clients, [
    {
      id: "hashed-app",
      secret_env: null,
      ...unused,
      plan: null,
      scopes: [],
      default_scopes: [],
      resources: ["upstream"],
      dpop: "optional",
    },
    {
      id: "env-app",
      secret_env: "ADMIN_TEST_SECRET",
      ...unused,
      plan: null,
      scopes: [],
      default_scopes: [],
      resources: ["upstream"],
      dpop: "optional",
    },
  ]);
  t.equal(config.tokens.signing.key_file, "signing.pem", "the key's path, not the key");
  t.equal(
    config.limits.redis.url,
    "redis://gatehouse@127.0.0.1:6379",
    "the URL without its password",
  );
});

// The keys a value of `shape` must show, as dotted paths; arrays and records by each member.
function missingKeys(shape: SchemaShape, value: unknown, at: string): string[] {
  if (Array.isArray(value)) {
    return value.flatMap((member, i) => missingKeys(shape.items ?? {}, member, `${at}[${i}]`));
  }
  if (value === null || typeof value !== "object") return [];
  const shown = value as Record<string, unknown>;
  const missing: string[] = [];
  for (const [key, child] of Object.entries(shape.properties ?? {})) {
    if (key === "secret_hash") continue;
    if (!(key in shown)) missing.push(`${at}.${key}`);
    else missing.push(...missingKeys(child, shown[key], `${at}.${key}`));
  }
  if (typeof shape.additionalProperties === "object") {
    for (const [key, child] of Object.entries(shown)) {
      missing.push(...missingKeys(shape.additionalProperties, child, `${at}.${key}`));
    }
  }
  return missing;
}

interface SchemaShape {
  properties?: Record<string, SchemaShape>;
  items?: SchemaShape;
  additionalProperties?: SchemaShape | boolean;
}

t.test("GET /config shows every key of the schema, computed defaults as computed", async (t) => {
  const config = json(await send(`${gh.adminUrl}/config`)) as Record<string, unknown> & {
    tokens: { verify_concurrency: number; signing: Record<string, unknown> };
    routes: Array<Record<string, unknown>>;
    plans: Record<string, unknown>;
  };
  const schema = JSON.parse(await readFile("config.schema.json", "utf8")) as SchemaShape;
  t.strictSame(missingKeys(schema, config, ""), [], "no key of the schema is left out");
  t.equal(config.tokens.verify_concurrency, availableParallelism(), "the number of CPUs");
  t.equal(config.tokens.signing.secret_env, null, "the alternative to key_file is null");
  t.strictSame(config.routes[0], {
    path: "/v1/items",
    methods: ["GET"],
    cost: 1,
    auth: "bearer",
    scopes: null,
    scopes_any: null,
    dpop: "optional",
    websocket: false,
    token_from: ["header"],
    origins: null,
  });
  t.strictSame(config.plans, {});
});

t.test("GET /config names the plan a client falls back to, and Redis's default URL", async (t) => {
  const other = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  verify_concurrency: 3
clients:
  - id: plain
    secret_env: ADMIN_TEST_SECRET
plans:
  default:
    rate_limit: { limit: 5, window: 1m }
`,
    ),
    { env: { ADMIN_TEST_SECRET: ENV_SECRET } },
  );
  t.teardown(() => other.close());
  const config = json(await send(`${other.adminUrl}/config`)) as {
    tokens: { verify_concurrency: number };
    clients: Array<{ plan: string | null }>;
    plans: { default: Record<string, unknown> };
    limits: { redis: { url: string } };
  };
  t.equal(config.tokens.verify_concurrency, 3, "a value given is shown as given");
  t.equal(config.clients[0]?.plan, "default", "a client without plan uses the plan default");
  t.strictSame(config.plans.default, {
    rate_limit: { limit: 5, window: "1m" },
    rate_limits: null,
    quota: null,
    connections: null,
  });
  t.equal(config.limits.redis.url, "redis://127.0.0.1:6379");
});

t.test("GET /config shows no secret, secret hash or key", async (t) => {
  const body = (await send(`${gh.adminUrl}/config`)).body.toString("utf8");
  const keyBody = keyPem.split("\n")[1] as string;
  for (const [what, value] of [
    ["the client secret", CLIENT_SECRET],
    ["the secret hash", secretHash],
    ["the hash's derived key", secretHash.split("$").at(-1) as string],
    ["the secret from the environment", ENV_SECRET],
    ["the Redis password", REDIS_PASSWORD],
    ["the signing key", keyBody],
    ["scrypt at all", "scrypt"],
  ] as const) {
    t.notOk(body.includes(value), `${what} does not appear`);
  }
});

t.test("GET /config follows a reload", async (t) => {
  await gh.writeConfig(withCredentials("  - path: /v1/reports\n    methods: [GET]\n"));
  t.equal(await gh.gatehouse.reload(), "success");
  const config = json(await send(`${gh.adminUrl}/config`)) as { routes: Array<{ path: string }> };
  t.strictSame(
    config.routes.map((route) => route.path),
    ["/v1/items", "/v1/reports"],
  );
});

t.test("GET /version is package.json's version", async (t) => {
  const { version } = JSON.parse(await readFile("package.json", "utf8")) as { version: string };
  const answer = await send(`${gh.adminUrl}/version`);
  t.equal(answer.status, 200);
  t.strictSame(json(answer), { version });
  t.match(version, /^\d+\.\d+\.\d+/);
});

t.test("a query is ignored; HEAD is answered as GET, without a body", async (t) => {
  t.equal((await send(`${gh.adminUrl}/version?pretty=1`)).status, 200);
  const head = await send(`${gh.adminUrl}/version`, { method: "HEAD" });
  t.equal(head.status, 200);
  t.equal(head.body.length, 0);
});

t.test("an unknown path is 404 not_found; another method 405 with Allow", async (t) => {
  const missing = await send(`${gh.adminUrl}/configs`);
  t.equal(missing.status, 404);
  t.equal(json(missing).error, "not_found");
  t.match(json(missing).message, /GET \/config/);
  const wrong = await send(`${gh.adminUrl}/config`, { method: "POST" });
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.allow, "GET");
  t.equal(json(wrong).error, "method_not_allowed");
});

t.test("GET /metrics still serves Prometheus text", async (t) => {
  t.match(await scrape(gh), /^# HELP /m);
});
