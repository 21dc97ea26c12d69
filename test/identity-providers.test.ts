/**
 * gatehouse as the resource server of a real identity provider (docs/identity-providers.md):
 * panva's oidc-provider runs in this process and issues RS256 JWT access tokens by client
 * credentials for gatehouse's audience. Its tokens are accepted beside gatehouse's own, scopes
 * are enforced and capped, its unlisted clients count under the issuer's plan apart from own
 * clients of the same id, a key rotation is picked up on the unknown kid, a flood of unknown kids
 * fetches at most once per 30 s, and a provider that stops answering turns no good token into a
 * 401. Time that gatehouse waits on (refreshes, backoff, the cool-down) is moved, not slept.
 */
import t from "tap";
import { withDpop } from "./helpers/challenges.js";
import { SignJWT } from "jose";
import { json, send, eventually } from "./helpers/client.js";
import { manualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { startProvider, type ProviderClient } from "./helpers/provider.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const RESOURCE = "https://api.example.com";
const BILLING: ProviderClient = {
  id: "billing",
  secret: "billing-secret",
  scope: "items:read items:write",
};
const PARTNER: ProviderClient = { id: "partner-x", secret: "partner-secret", scope: "items:read" };
const READER: ProviderClient = { id: "billing", secret: "reader-secret", scope: "items:read" };
const OWN_PARTNER = { id: "partner-x", secret: "own-partner-x-secret-long-enough" };
// A client of the provider's that the file does not list, with an id no own client has.
const STRANGER: ProviderClient = {
  id: "partner-y",
  secret: "stranger-secret",
  scope: "items:read",
};

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const provider = await startProvider({
  resource: RESOURCE,
  clients: [BILLING, PARTNER, STRANGER],
  scopes: ["items:read", "items:write"],
  oidcOnly: true,
});
t.teardown(() => provider.close());

const clock = manualClock();
const own = await clientsYaml([
  { ...OWN_PARTNER, extra: ["plan: premium", "scopes: [items:read]"] },
]);
const yaml = (partnerLimit: number) =>
  configFor(
    upstream.url,
    `tokens:
  audience: ${RESOURCE}
  scopes: [items:read, items:write]
  failure_limit: { limit: 3, window: 1h }
  trusted_issuers:
    - name: corp
      issuer: ${provider.issuer}
      plan: partner
${own}  - id: billing
    issuer: corp
    plan: premium
    scopes: [items:read]
plans:
  premium:
    rate_limit: { limit: 1000, window: 1h }
  partner:
    rate_limit: { limit: ${partnerLimit}, window: 1h }
routes:
  - path: /v1/items
    methods: [GET]
    scopes: [items:read]
  - path: /v1/items/*
    methods: [PUT]
    scopes: [items:write]
`,
  );
const g = await startTestGatehouse(yaml(2), { clock });
t.teardown(() => g.close());

const fetches = (result: string): Promise<number> =>
  metric(g, "gatehouse_issuer_keys_fetch_total", { issuer: "corp", result }).then((value) =>
    Number.isNaN(value) ? 0 : value,
  );
const jwksHits = (): number => provider.hits.get("/jwks") ?? 0;
const bearer = (token: string, headers: Record<string, string> = {}) => ({
  headers: { authorization: `Bearer ${token}`, ...headers },
});

t.test(
  "the keys are fetched at start by OpenID Connect Discovery, without holding /readyz",
  async (t) => {
    t.equal((await send(`${g.url}/readyz`)).status, 200);
    t.ok(await eventually(async () => (await fetches("ok")) === 1), "one fetch succeeded");
    // oidc-provider publishes no RFC 8414 document: its 404 sends gatehouse to the OIDC one.
    t.equal(provider.hits.get("/.well-known/oauth-authorization-server"), 1);
    t.equal(provider.hits.get("/.well-known/openid-configuration"), 1);
    t.equal(jwksHits(), 1);
  },
);

t.test("a listed client's token: accepted, identity and issuer sent, scopes capped", async (t) => {
  const token = await provider.token(BILLING);
  const before = upstream.received.length;
  const answer = await send(
    `${g.url}/v1/items`,
    bearer(token, { "x-client-issuer": "own", "x-client-id": "admin", x_client_issuer: "own" }),
  );
  t.equal(answer.status, 200);
  const seen = upstream.received[before]?.headers ?? {};
  t.equal(seen["x-client-id"], "billing");
  t.equal(seen["x-client-issuer"], "corp");
  // The provider granted items:write too; the client's entry caps it to items:read.
  t.equal(seen["x-client-scopes"], "items:read");
  const write = await send(`${g.url}/v1/items/1`, { method: "PUT", ...bearer(token) });
  t.equal(write.status, 403);
  t.equal(json(write).error, "insufficient_scope");
  t.equal(await metric(g, "gatehouse_bearer_tokens_verified_total", { issuer: "corp" }), 1);
  const shown = json(await send(`${g.adminUrl}/config`)) as { tokens: Record<string, unknown> };
  t.match(shown.tokens.trusted_issuers, [
    { name: "corp", issuer: provider.issuer, plan: "partner" },
  ]);
  const line = g.logs.find((entry) => entry.msg === "request" && entry.clientId === "billing");
  t.equal(line?.issuer, "corp", "the access log names the issuer");
});

t.test("an unlisted client counts under the issuer's plan", async (t) => {
  const token = await provider.token(STRANGER);
  const statuses = [];
  for (let i = 0; i < 3; i++)
    statuses.push((await send(`${g.url}/v1/items`, bearer(token))).status);
  t.strictSame(statuses, [200, 200, 429]);
  const admin = await send(`${g.adminUrl}/limits/clients/corp:partner-y`);
  t.equal(admin.status, 200);
  const view = json(admin) as { plan: string; limits: Array<{ remaining: number }> };
  t.equal(view.plan, "partner");
  t.equal(view.limits[0]?.remaining, 0);
  t.equal((await send(`${g.adminUrl}/limits/clients/other:partner-y`)).status, 404);
});

t.test("an unlisted client with the id of an own client is refused", async (t) => {
  // The upstream reads X-Client-Id alone: it would take the provider's partner-x for the own one.
  const before = upstream.received.length;
  const answer = await send(`${g.url}/v1/items`, bearer(await provider.token(PARTNER)));
  t.equal(answer.status, 401);
  t.match(json(answer), {
    error: "invalid_token",
    message: "the client id is taken by another client",
  });
  t.match(
    String(answer.headers["www-authenticate"]),
    /error_description="the client id is taken by another client"/,
  );
  t.equal(upstream.received.length, before, "nothing forwarded");
  const reason = { reason: "bearer_client_id_collision" };
  t.equal(await metric(g, "gatehouse_auth_failures_total", reason), 1, "counted by its reason");
  const ownAnswer = await send(`${g.url}/v1/items`, bearer(await obtainToken(g.url, OWN_PARTNER)));
  t.equal(ownAnswer.status, 200, "the own partner-x is served");
  t.equal(upstream.received.at(-1)?.headers["x-client-issuer"], "own");
});

t.test("a key rotation is picked up on the token naming the new kid", async (t) => {
  const jwks = jwksHits();
  await provider.rotate();
  const token = await provider.token(BILLING);
  t.equal((await send(`${g.url}/v1/items`, bearer(token))).status, 200);
  t.equal(jwksHits(), jwks + 1, "one refetch for the unknown kid");
});

t.test("a flood of unknown kids fetches at most once per 30 s and counts no failure", async (t) => {
  clock.advance(30_000);
  const jwks = jwksHits();
  const ok = await fetches("ok");
  const forge = (kid: string) =>
    new SignJWT({ client_id: "billing", scope: "items:read" })
      .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid })
      .setIssuer(provider.issuer)
      .setAudience(RESOURCE)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(provider.key.privateKey);
  const kids = Array.from({ length: 10 }, (_, i) => `random-${i}`);
  const answers = [];
  for (const kid of kids) answers.push(await send(`${g.url}/v1/items`, bearer(await forge(kid))));
  // The first kid is fetched for at once and is not there: 401. The others come during the
  // cool-down: 503 until the refetch made when it ends, in 30 s.
  t.strictSame(
    answers.map((answer) => answer.status),
    [401, ...Array<number>(9).fill(503)],
  );
  t.strictSame(
    answers.slice(1).map((answer) => answer.headers["retry-after"]),
    Array<string>(9).fill("30"),
  );
  t.equal(jwksHits(), jwks + 1, "one fetch for ten unknown kids");
  t.equal(await metric(g, "gatehouse_auth_failures_total", { reason: "bearer_unknown_kid" }), 10);

  clock.advance(30_000);
  t.ok(await eventually(async () => (await fetches("ok")) === ok + 2), "refetched when it ends");
  t.equal(jwksHits(), jwks + 2);
  const again = await send(`${g.url}/v1/items`, bearer(await forge("random-5")));
  t.equal(again.status, 401, "after that refetch, a kid still unknown is 401");
  t.equal(jwksHits(), jwks + 2, "and costs no fetch");
  // failure_limit is 3 an hour: had they counted, a good token would now be answered 429.
  const good = await provider.token(BILLING);
  t.equal((await send(`${g.url}/v1/items`, bearer(good))).status, 200);
});

t.test(
  "a provider that stops answering: known keys keep working, an unknown kid is 503",
  async (t) => {
    const unused = await provider.token(BILLING);
    // The provider rotates, then stops answering: gatehouse never saw the new key.
    await provider.rotate();
    const forged = await new SignJWT({ client_id: "billing", scope: "items:read" })
      .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: provider.key.kid })
      .setIssuer(provider.issuer)
      .setAudience(RESOURCE)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(provider.key.privateKey);
    provider.stop();
    const failedBefore = await fetches("network");
    clock.advance(10 * 60_000);
    t.ok(await eventually(async () => (await fetches("network")) === failedBefore + 1));
    t.equal((await send(`${g.url}/v1/items`, bearer(unused))).status, 200, "the last good keys");
    const answer = await send(`${g.url}/v1/items`, bearer(forged));
    t.equal(answer.status, 503);
    t.equal(json(answer).error, "temporarily_unavailable");
    t.ok(
      Number(answer.headers["retry-after"]) >= 1,
      "Retry-After: the seconds to the next attempt",
    );
    const id = String(answer.headers["x-request-id"]);
    const line = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
    t.equal(line.reason, "bearer_keys_unavailable", "the access line says why");
    // Backoff retries fail too; the outage is logged once. Each poll moves time past the backoff.
    t.ok(
      await eventually(async () => {
        clock.advance(30_000);
        return (await fetches("network")) >= failedBefore + 4;
      }),
    );
    const warned = g.logs.filter(
      (line) => line.msg === "issuer keys cannot be fetched; the last good keys stay in use",
    );
    t.equal(warned.length, 1, "logged once per outage");

    provider.resume();
    const okBefore = await fetches("ok");
    t.ok(
      await eventually(async () => {
        clock.advance(30_000);
        return (await fetches("ok")) > okBefore;
      }),
    );
    // The log's lines are flushed on the clock.
    clock.advance(1000);
    t.ok(
      await eventually(async () => g.logs.some((line) => line.msg === "issuer keys fetched again")),
    );
    t.equal(
      (await send(`${g.url}/v1/items`, bearer(forged))).status,
      200,
      "the rotated key, fetched again",
    );
  },
);

t.test(
  "discovery by RFC 8414 when the provider serves it; resource-server-only mode",
  async (t) => {
    const other = await startProvider({
      resource: RESOURCE,
      clients: [READER],
      scopes: ["items:read"],
    });
    t.teardown(() => other.close());
    const h = await startTestGatehouse(
      configFor(
        upstream.url,
        `tokens:
  audience: ${RESOURCE}
  trusted_issuers:
    - name: second
      issuer: ${other.issuer}
clients:
  - id: billing
    issuer: second
routes:
  - path: /v1/items
    methods: [GET]
`,
      ),
      { clock: manualClock() },
    );
    t.teardown(() => h.close());
    const token = await other.token(READER);
    t.equal((await send(`${h.url}/v1/items`, bearer(token))).status, 200);
    t.equal(other.hits.get("/.well-known/oauth-authorization-server"), 1);
    t.equal(other.hits.get("/.well-known/openid-configuration"), undefined);
    // Resource-server-only: no client authenticates to gatehouse itself.
    t.equal((await send(`${h.url}/oauth/token`, { method: "POST" })).status, 404);
    t.equal((await send(`${h.url}/.well-known/jwks.json`)).status, 404);
    t.equal((await send(`${h.url}/.well-known/oauth-authorization-server`)).status, 404);
    const document = await send(`${h.url}/.well-known/oauth-protected-resource`);
    t.equal(document.status, 200);
    t.match(json(document), { resource: RESOURCE, authorization_servers: [other.issuer] });
    // RFC 9728 §5.1: a refused request learns where the document is, and so the provider.
    t.equal(
      (await send(`${h.url}/v1/items`)).headers["www-authenticate"],
      withDpop(
        `Bearer realm="gatehouse", resource_metadata="${RESOURCE}/.well-known/oauth-protected-resource"`,
      ),
    );
  },
);

t.test("authorization_servers: the trusted issuers in order, then gatehouse's own", async (t) => {
  const own = await clientsYaml([OWN_PARTNER]);
  const h = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  issuer: https://auth.example.com
  audience: ${RESOURCE}
  trusted_issuers:
    - name: corp
      issuer: ${provider.issuer}
    - name: second
      issuer: http://127.0.0.1:1/second
${own}routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    { clock: manualClock() },
  );
  t.teardown(() => h.close());
  const document = await send(`${h.url}/.well-known/oauth-protected-resource`);
  t.strictSame(json(document).authorization_servers, [
    provider.issuer,
    "http://127.0.0.1:1/second",
    "https://auth.example.com",
  ]);
  const challenge = (await send(`${h.url}/v1/items`)).headers["www-authenticate"];
  t.equal(
    challenge,
    withDpop(
      `Bearer realm="gatehouse", resource_metadata="${RESOURCE}/.well-known/oauth-protected-resource"`,
    ),
  );
});
