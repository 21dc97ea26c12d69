/**
 * The failure limit (`tokens.failure_limit`) while Redis is down follows `limits.redis.on_outage`
 * like every limit: `local` counts in this process, `open` counts nothing and refuses nothing,
 * `closed` answers 503 `limits_unavailable`. Under `local` and `open` an outage never stops token
 * issuance. Each policy runs against a redis-server of the test's own, killed mid-test; gatehouse
 * trusts 127.0.0.1, so X-Forwarded-For gives each request the client IP wanted.
 */
import { randomBytes } from "node:crypto";
import t, { type Test } from "tap";
import { eventually, json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import {
  clientsYaml,
  forged,
  form,
  obtainToken,
  postToken,
  type TestClient,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "a-secret-for-the-outage-tests-0123" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

type Policy = "local" | "open" | "closed";

async function started(t: Test, onOutage: Policy): Promise<TestGatehouse> {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `trusted_proxies: [127.0.0.1]
tokens:
  failure_limit: { limit: 3, window: 1m }
${await clientsYaml([APP])}
limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "gatehouse-outage-${randomBytes(6).toString("hex")}:"
    timeout: 10s
    on_outage: ${onOutage}
routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
  );
  t.teardown(() => g.close());
  t.ok(await connected(g), "Redis answers");
  // A token obtained while Redis answers, for the bearer checks during the outage.
  tokens.set(g, await obtainToken(g.url, APP));
  await redis.kill();
  t.ok(
    await eventually(async () => (await metric(g, "gatehouse_limiter_store_up")) === 0),
    "the store sees Redis down",
  );
  return g;
}

const tokens = new Map<TestGatehouse, string>();

const attempt = (g: TestGatehouse, ip: string, secret = APP.secret) =>
  postToken(g.url, {
    headers: { "x-forwarded-for": ip },
    body: form([
      ["client_id", APP.id],
      ["client_secret", secret],
    ]),
  });

const bearer = (g: TestGatehouse, ip: string, token: string) =>
  send(`${g.url}/v1/items`, {
    headers: { "x-forwarded-for": ip, authorization: `Bearer ${token}` },
  });

t.test("local: failures are counted in this process, and tokens are issued", async (t) => {
  const g = await started(t, "local");
  t.equal((await attempt(g, "192.0.2.1")).status, 200, "the right secret: a token");
  for (let i = 1; i <= 3; i++) {
    t.equal((await attempt(g, "192.0.2.2", `guess-${i}`)).status, 401, `failure ${i}`);
  }
  // A secret remembered as correct is no guess and would pass: a 4th guess finds the limit.
  const refused = await attempt(g, "192.0.2.2", "guess-4");
  t.equal(refused.status, 429, "beyond the limit, counted in memory: 429");
  t.equal(refused.json.error, "rate_limited");
  t.equal((await attempt(g, "192.0.2.3")).status, 200, "another address: a token");

  const token = tokens.get(g) as string;
  for (let i = 1; i <= 3; i++) {
    t.equal((await bearer(g, "192.0.2.4", forged(token))).status, 401, `forged token ${i}`);
  }
  t.equal((await bearer(g, "192.0.2.4", forged(token))).status, 429, "refused tokens counted too");
  t.ok((await metric(g, "gatehouse_limiter_fallbacks_total")) > 0, "counted by the fallback");
});

t.test("open: failures are not counted and never refused, tokens are issued", async (t) => {
  const g = await started(t, "open");
  for (let i = 1; i <= 6; i++) {
    const failed = await attempt(g, "192.0.2.10", `guess-${i}`);
    t.equal(failed.status, 401, `failure ${i}: 401, never 429`);
  }
  const issued = await attempt(g, "192.0.2.10");
  t.equal(issued.status, 200, "the right secret from the same address: a token");
  t.type(issued.json.access_token, "string");

  const token = tokens.get(g) as string;
  for (let i = 1; i <= 5; i++) {
    t.equal((await bearer(g, "192.0.2.11", forged(token))).status, 401, `forged token ${i}`);
  }
  t.equal((await bearer(g, "192.0.2.11", token)).status, 200, "a valid token passes");
  t.ok(
    (await metric(g, "gatehouse_limiter_store_errors_total", { on_outage: "open" })) > 0,
    "the uncounted calls are counted as store errors",
  );
  t.equal(await metric(g, "gatehouse_limiter_fallbacks_total"), 0, "nothing counted locally");
});

t.test("closed: 503 limits_unavailable, in the token endpoint's OAuth format", async (t) => {
  const g = await started(t, "closed");
  const refused = await attempt(g, "192.0.2.20");
  t.equal(refused.status, 503, "the right secret: 503, not a token");
  t.equal(refused.headers["retry-after"], "1");
  t.equal(refused.headers["cache-control"], "no-store");
  t.match(refused.json, { error: "limits_unavailable", error_description: /failure limiter/ });

  const token = tokens.get(g) as string;
  const unverified = await bearer(g, "192.0.2.21", forged(token));
  t.equal(unverified.status, 503, "a token not verified before cannot be counted: 503");
  t.equal(unverified.headers["retry-after"], "1");
  t.match(json(unverified), { error: "limits_unavailable" });
  const line = await g.logged(
    (logged) => logged.requestId === unverified.headers["x-request-id"] && "status" in logged,
  );
  t.match(
    line,
    { status: 503, decision: "limits_unavailable" },
    "logged with the limits' decision",
  );
  t.ok((await metric(g, "gatehouse_limiter_store_errors_total", { on_outage: "closed" })) >= 2);
});
