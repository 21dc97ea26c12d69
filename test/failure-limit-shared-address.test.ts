/**
 * Many clients behind one address (a NAT, an office, a cluster's egress): when one of them fails
 * past `tokens.failure_limit`, the others' work that is already known good goes on. A token
 * verified before and a secret remembered as correct are neither refused nor counted for the
 * address's failures; a token never verified and a secret never remembered are refused 429 as
 * before, a wrong secret too. A reload that changes no key, issuer or client keeps what was
 * learnt; one that changes a client forgets it. Through real sockets, each client address given
 * by X-Forwarded-For from a trusted 127.0.0.1, with the memory store and with a redis-server of
 * the test's own, on a clock that moves only when the test says (a window never ends mid-test).
 */
import { randomBytes } from "node:crypto";
import t, { type Test } from "tap";
import { send } from "./helpers/client.js";
import { configFor, startOnTestClock, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import {
  basic,
  clientsYaml,
  forged,
  form,
  obtainToken,
  postToken,
  type TestClient,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const ALPHA: TestClient = { id: "alpha-app", secret: "alpha-app-secret-0123456789abcdef" };
const BETA: TestClient = { id: "beta-app", secret: "beta-app-secret-0123456789abcdef" };
// Never authenticates from the shared address before it is locked.
const GAMMA: TestClient = { id: "gamma-app", secret: "gamma-app-secret-0123456789abcdef" };

const SHARED = "198.51.100.40";
const ELSEWHERE = "192.0.2.1";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

type Store = "memory" | "redis";

// Hashed once: hash-secret salts each hash, and a new hash is a changed client.
const CLIENTS_YAML = await clientsYaml([ALPHA, BETA]);
const GAMMA_YAML = new Map(
  await Promise.all(
    ["[]", "[items:read]"].map(async (scopes) => {
      const entry = await clientsYaml([{ ...GAMMA, extra: [`scopes: ${scopes}`] }]);
      return [scopes, entry.replace("clients:\n", "")] as const;
    }),
  ),
);

/** The config: ten failures a minute per address, GAMMA with `gammaScopes`, routes `paths`. */
function config(limits: string, gammaScopes = "[]", paths = ["/v1/items"]): string {
  return configFor(
    upstream.url,
    `trusted_proxies: [127.0.0.1]
tokens:
  scopes: [items:read]
  failure_limit: { limit: 10, window: 1m }
${CLIENTS_YAML}${GAMMA_YAML.get(gammaScopes)}${limits}routes:
${paths.map((path) => `  - path: ${path}\n    methods: [GET]\n`).join("")}`,
  );
}

/** The limits section for `store`: nothing for memory; a redis-server of the test's own. */
async function limitsFor(t: Test, store: Store): Promise<string> {
  if (store === "memory") return "";
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  return `limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "shared-${randomBytes(6).toString("hex")}:"
    timeout: 10s
`;
}

async function started(t: Test, store: Store) {
  const limits = await limitsFor(t, store);
  const { g } = await startOnTestClock(t, config(limits), Date.now());
  if (store === "redis") t.ok(await connected(g), "Redis answers");
  return { g, limits };
}

const tokenRequest = (g: TestGatehouse, ip: string, client: TestClient, secret = client.secret) =>
  postToken(g.url, {
    headers: { "x-forwarded-for": ip },
    body: form([
      ["client_id", client.id],
      ["client_secret", secret],
    ]),
  });

const basicRequest = (g: TestGatehouse, ip: string, client: TestClient, secret = client.secret) =>
  postToken(g.url, { headers: { "x-forwarded-for": ip, authorization: basic(client.id, secret) } });

const get = (g: TestGatehouse, ip: string, token: string) =>
  send(`${g.url}/v1/items`, {
    headers: { "x-forwarded-for": ip, authorization: `Bearer ${token}` },
  });

/** `count` of ALPHA's forged tokens from `ip`, each refused 401 and counted. */
async function failures(t: Test, g: TestGatehouse, ip: string, count: number): Promise<void> {
  const token = await obtainToken(g.url, ALPHA);
  for (let i = 1; i <= count; i++) {
    t.equal((await get(g, ip, forged(token))).status, 401, `alpha's forged token ${i}: 401`);
  }
}

/** BETA's secret remembered and a token of it verified, both from `ip`; and a token never used. */
async function betaKnown(t: Test, g: TestGatehouse, ip: string) {
  const issued = await tokenRequest(g, ip, BETA);
  t.equal(issued.status, 200, "beta gets a token");
  const token = issued.json.access_token as string;
  t.equal((await get(g, ip, token)).status, 200, "and uses it: verified");
  const unused = (await tokenRequest(g, ip, BETA)).json.access_token as string;
  return { token, unused };
}

/** What a locked address is still served, and what it is refused. */
async function servedWhileLocked(
  t: Test,
  g: TestGatehouse,
  beta: { token: string; unused: string },
): Promise<void> {
  t.equal((await tokenRequest(g, SHARED, BETA)).status, 200, "beta's remembered secret: a token");
  t.equal((await basicRequest(g, SHARED, BETA)).status, 200, "with Basic too");
  const password = await postToken(g.url, {
    headers: { "x-forwarded-for": SHARED, authorization: basic(BETA.id, BETA.secret) },
    body: form([["grant_type", "password"]]),
  });
  t.equal(password.json.error, "unsupported_grant_type", "and its mistakes get their own answer");
  t.equal((await get(g, SHARED, beta.token)).status, 200, "beta's verified token passes");
  t.equal(upstream.received.at(-1)?.headers["x-client-id"], BETA.id);
  t.equal((await get(g, SHARED, beta.unused)).status, 429, "a token never verified: 429");
  const wrong = await tokenRequest(g, SHARED, BETA, "beta-app-secret-0123456789abcdeF");
  t.equal(wrong.status, 429, "a wrong secret for beta: 429, as any guess");
  t.equal(wrong.json.error, "rate_limited");
  t.equal((await basicRequest(g, SHARED, BETA, "guess")).status, 429, "with Basic too");
  t.equal((await tokenRequest(g, SHARED, GAMMA)).status, 429, "a secret never remembered: 429");
  t.equal((await basicRequest(g, SHARED, GAMMA)).status, 429, "with Basic too");
}

for (const store of ["memory", "redis"] as const) {
  t.test(`${store} store: one client's failures leave its neighbours' known work`, async (t) => {
    const { g, limits } = await started(t, store);
    const beta = await betaKnown(t, g, SHARED);
    await failures(t, g, SHARED, 10);
    const alpha = await obtainToken(g.url, ALPHA);
    t.equal((await get(g, SHARED, forged(alpha))).status, 429, "the address is over the limit");
    await servedWhileLocked(t, g, beta);

    // A reload of routes only: what was verified and remembered still holds.
    await g.writeConfig(config(limits, "[]", ["/v1/items", "/v1/orders"]));
    t.equal(await g.gatehouse.reload(), "success", "a reload of the routes");
    await servedWhileLocked(t, g, beta);

    // A reload that changes a client: nothing learnt is kept, the address's lock applies to all.
    await g.writeConfig(config(limits, "[items:read]", ["/v1/items", "/v1/orders"]));
    t.equal(await g.gatehouse.reload(), "success", "a reload that changes gamma-app");
    t.equal((await tokenRequest(g, SHARED, BETA)).status, 429, "beta's secret is forgotten: 429");
    t.equal((await get(g, SHARED, beta.token)).status, 429, "its token is not verified: 429");
    t.equal((await get(g, ELSEWHERE, beta.token)).status, 200, "the token is good elsewhere");
    t.equal((await get(g, SHARED, beta.token)).status, 200, "and, verified again, here too");
    t.equal((await tokenRequest(g, ELSEWHERE, BETA)).status, 200, "so is the secret elsewhere");
    t.equal((await tokenRequest(g, SHARED, BETA)).status, 200, "and, remembered again, here");
  });

  t.test(`${store} store: known good work costs nothing against the limit`, async (t) => {
    const { g } = await started(t, store);
    const ip = "203.0.113.50";
    const beta = await betaKnown(t, g, ip);
    await failures(t, g, ip, 9);
    for (let i = 1; i <= 5; i++) {
      t.equal((await tokenRequest(g, ip, BETA)).status, 200, `remembered secret ${i}`);
      t.equal((await get(g, ip, beta.token)).status, 200, `verified token ${i}`);
    }
    const alpha = await obtainToken(g.url, ALPHA);
    t.equal((await get(g, ip, forged(alpha))).status, 401, "the 10th failure is still allowed");
    t.equal((await get(g, ip, forged(alpha))).status, 429, "the 11th finds the limit");
  });
}
