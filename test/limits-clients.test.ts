import t from "tap";
import { startTestGatehouse, configFor, type TestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const SECRETS: Record<string, string> = {
  ALPHA_SECRET: "alpha-secret-for-the-limits-tests",
  BETA_SECRET: "beta-secret-for-the-limits-tests",
  GAMMA_SECRET: "gamma-secret-for-the-limits-tests",
};
const env = { ...process.env, ...SECRETS };

function config(betaLimit = 2, standardLimit = 3): string {
  return configFor(
    upstream.url,
    `clients:
  - id: alpha
    secret_env: ALPHA_SECRET
    plan: standard
  - id: beta
    secret_env: BETA_SECRET
    plan: standard
    rate_limit: { limit: ${betaLimit}, window: 1m }
  - id: gamma
    secret_env: GAMMA_SECRET
plans:
  standard:
    rate_limit: { limit: ${standardLimit}, window: 1m }
    quota: { limit: 100, period: day }
  default:
    rate_limit: { limit: 2, window: 1m }
routes:
  - path: /v1/items
    methods: [GET]
  - path: /v1/items/*
    methods: [GET]
    cost: 2
`,
  );
}

async function token(g: TestGatehouse, id: string): Promise<string> {
  const secret = SECRETS[`${id.toUpperCase()}_SECRET`] as string;
  const response = await fetch(`${g.url}/oauth/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: "grant_type=client_credentials",
  });
  const body = (await response.json()) as { access_token: string };
  if (response.status !== 200) throw new Error(`token for ${id}: ${response.status}`);
  return body.access_token;
}

async function get(g: TestGatehouse, bearer: string, path = "/v1/items"): Promise<Response> {
  const response = await fetch(`${g.url}${path}`, {
    headers: { authorization: `Bearer ${bearer}` },
  });
  await response.arrayBuffer();
  return response;
}

function left(response: Response): [number, string | null, string | null] {
  return [
    response.status,
    response.headers.get("x-ratelimit-remaining"),
    response.headers.get("x-request-quota-limit-remaining"),
  ];
}

t.test("each client counts against its own plan, keyed by client id", async (t) => {
  const g = await startTestGatehouse(config(), { env });
  t.teardown(() => g.close());
  const alpha = await token(g, "alpha");
  const beta = await token(g, "beta");
  const gamma = await token(g, "gamma");

  const first = await get(g, alpha);
  t.equal(first.headers.get("x-ratelimit-limit"), "3");
  t.equal(first.headers.get("x-request-quota-limit"), "100");
  t.strictSame(left(first), [200, "2", "99"]);
  t.strictSame(left(await get(g, alpha, "/v1/items/7")), [200, "0", "97"], "cost 2 for both");
  const refused = await get(g, alpha);
  t.strictSame(left(refused), [429, "0", "97"]);
  t.equal(refused.headers.get("retry-after") !== null, true);

  // Same IP, other clients: their own counters.
  const betaFirst = await get(g, beta);
  t.equal(betaFirst.headers.get("x-ratelimit-limit"), "2", "the client's override");
  t.equal(betaFirst.headers.get("x-request-quota-limit"), "100", "the plan's quota stays");
  t.strictSame(left(betaFirst), [200, "1", "99"], "beta's quota is not alpha's");
  t.equal((await get(g, beta)).status, 200);
  t.equal((await get(g, beta)).status, 429);

  const gammaFirst = await get(g, gamma);
  t.equal(gammaFirst.headers.get("x-ratelimit-limit"), "2", "no plan: the plan named default");
  t.equal(gammaFirst.headers.get("x-request-quota-limit"), null, "default has no quota");

  const line = g.logs.find((l) => l.msg === "request" && l.status === 429);
  t.match(line, { clientId: "alpha", decision: "rate_limited" });
});

t.test("a client without a plan, and no default plan, is not limited", async (t) => {
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `clients:
  - id: alpha
    secret_env: ALPHA_SECRET
plans:
  standard:
    rate_limit: { limit: 1, window: 1m }
routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    { env },
  );
  t.teardown(() => g.close());
  const alpha = await token(g, "alpha");
  for (let i = 0; i < 3; i++) {
    const response = await get(g, alpha);
    t.equal(response.status, 200);
    t.equal(response.headers.get("x-ratelimit-limit"), null);
  }
});

t.test("401s never reach the limiter and carry no limit headers", async (t) => {
  const g = await startTestGatehouse(config(), { env });
  t.teardown(() => g.close());
  for (const authorization of [undefined, "Bearer not.a.token"]) {
    const response = await fetch(`${g.url}/v1/items`, {
      headers: authorization === undefined ? {} : { authorization },
    });
    await response.arrayBuffer();
    t.equal(response.status, 401);
    t.equal(response.headers.get("x-ratelimit-limit"), null);
  }
});

t.test("a reload keeps the counters of the plans and overrides it leaves alone", async (t) => {
  const g = await startTestGatehouse(config(2, 3), { env });
  t.teardown(() => g.close());
  const alpha = await token(g, "alpha");
  const beta = await token(g, "beta");
  t.strictSame(left(await get(g, alpha)), [200, "2", "99"]);
  t.strictSame(left(await get(g, beta)), [200, "1", "99"], "each client has its own quota");

  await g.writeConfig(config(5, 3));
  t.equal(await g.gatehouse.reload(), "success");
  t.strictSame(left(await get(g, alpha)), [200, "1", "98"], "standard unchanged: kept");
  t.strictSame(left(await get(g, beta)), [200, "3", "98"], "beta's override raised: kept its 1");

  await g.writeConfig(config(5, 4));
  t.equal(await g.gatehouse.reload(), "success");
  t.strictSame(left(await get(g, beta)), [200, "2", "97"], "standard changed: override kept");
  t.strictSame(left(await get(g, alpha)), [200, "1", "97"], "3 of a new 4 were counted");
});

t.test("a reload derives no secret_env secret again; the tokens it issued stay good", async (t) => {
  const g = await startTestGatehouse(config(), { env });
  t.teardown(() => g.close());
  const before = g.gatehouse.config().tokens.clients.secrets.get("alpha");
  const alpha = await token(g, "alpha");
  await g.writeConfig(config(3, 5));
  t.equal(await g.gatehouse.reload("test"), "success");
  t.equal(
    g.gatehouse.config().tokens.clients.secrets.get("alpha"),
    before,
    "the record derived at start, not a new derivation",
  );
  t.equal((await get(g, alpha)).status, 200, "a token issued before the reload still passes");
  t.ok(await token(g, "alpha"), "and the secret still authenticates");
});
