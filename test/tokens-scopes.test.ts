/**
 * Scopes through real sockets (RFC 6749 §3.3, RFC 6750 §3.1, RFC 9068 §2.2.3; docs/tokens.md,
 * Scopes): what the token endpoint grants, the 403 challenge of a route whose scopes a token lacks
 * (never counted, never forwarded), and the scopes header the upstream receives.
 */
import t from "tap";
import { DPOP_CHALLENGE } from "./helpers/challenges.js";
import { send, json, type ClientResponse } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import {
  claimsOf,
  clientsYaml,
  form,
  obtainToken,
  postToken,
  type TestClient,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { metric } from "./helpers/metrics.js";

const READER: TestClient = {
  id: "reader",
  secret: "reader-secret-0123456789abcdef",
  extra: ["scopes: [items:read, reports:read]", "default_scopes: [items:read]", "plan: standard"],
};
const WRITER: TestClient = {
  id: "writer",
  secret: "writer-secret-0123456789abcdef",
  extra: ["scopes: [items:read, items:write]", "plan: standard"],
};
const PLAIN: TestClient = { id: "plain", secret: "plain-secret-0123456789abcdef" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

function yaml(scopesHeader = "X-Client-Scopes"): Promise<string> {
  return clientsYaml([READER, WRITER, PLAIN]).then((clients) =>
    configFor(
      upstream.url,
      `tokens:
  scopes: [items:read, items:write, reports:read]
${clients}plans:
  standard:
    rate_limit: { limit: 100, window: 1h }
routes:
  - path: /v1/items
    methods: [GET]
    scopes: [items:read]
  - path: /v1/items/*
    methods: [PUT]
    scopes: [items:read, items:write]
  - path: /v1/reports/**
    methods: [GET]
    scopes_any: [reports:read, items:write]
  - path: /v1/open
    methods: [GET]
`,
    ).replace("  timeout: 2s\n", `  timeout: 2s\n  scopes_header: "${scopesHeader}"\n`),
  );
}

const g = await startTestGatehouse(await yaml());
t.teardown(() => g.close());

function request(token: string, path: string, method = "GET", headers = {}) {
  return send(`${g.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...headers },
  });
}

function credentials(client: TestClient): Array<[string, string]> {
  return [
    ["client_id", client.id],
    ["client_secret", client.secret],
  ];
}

/**
 * The parameters of the Bearer challenge (RFC 6750 §3), each quoted-string unquoted, with the
 * DPoP challenge that follows it (RFC 9449 §7.1) left out.
 */
function challenge(response: ClientResponse): Record<string, string> {
  const value = (response.headers["www-authenticate"] ?? "").replace(`, ${DPOP_CHALLENGE}`, "");
  const [scheme, rest] = [value.slice(0, value.indexOf(" ")), value.slice(value.indexOf(" ") + 1)];
  const parameters: Record<string, string> = { scheme };
  for (const match of rest.matchAll(/([a-z_]+)="([^"]*)"(?:, |$)/g)) {
    parameters[match[1] as string] = match[2] as string;
  }
  return parameters;
}

t.test("the token endpoint grants requested scopes, or the client's default ones", async (t) => {
  const plain = await postToken(g.url, { body: form(credentials(READER)) });
  t.equal(plain.status, 200);
  t.equal(plain.json.scope, "items:read", "default_scopes when none is requested");
  t.equal(claimsOf(plain.json.access_token as string).scope, "items:read");

  const empty = await postToken(g.url, { body: form([...credentials(READER), ["scope", ""]]) });
  t.equal(empty.json.scope, "items:read", "an empty scope is an omitted one");

  const asked = await postToken(g.url, {
    body: form([...credentials(READER), ["scope", "reports:read items:read reports:read"]]),
  });
  t.equal(asked.status, 200);
  t.equal(asked.json.scope, "reports:read items:read", "each requested scope, once, in order");
  t.equal(claimsOf(asked.json.access_token as string).scope, "reports:read items:read");

  const all = await postToken(g.url, { body: form(credentials(WRITER)) });
  t.equal(all.json.scope, "items:read items:write", "default_scopes defaults to all of scopes");

  const none = await postToken(g.url, { body: form(credentials(PLAIN)) });
  t.equal(none.status, 200);
  t.notOk("scope" in none.json, "nothing granted: no scope member");
  t.notOk("scope" in claimsOf(none.json.access_token as string), "and no scope claim");
});

t.test("a scope the client may not have is 400 invalid_scope", async (t) => {
  for (const scope of ["items:write", "items:read admin", "items:read  reports:read"]) {
    const answer = await postToken(g.url, {
      body: form([...credentials(READER), ["scope", scope]]),
    });
    t.equal(answer.status, 400, scope);
    t.equal(answer.json.error, "invalid_scope", scope);
    t.type(answer.json.error_description, "string");
    t.equal(answer.headers["cache-control"], "no-store");
  }
  const twice = await postToken(g.url, {
    body: form([...credentials(READER), ["scope", "items:read"], ["scope", "items:read"]]),
  });
  t.equal(twice.status, 400);
  t.equal(twice.json.error, "invalid_request", "a repeated scope parameter");
});

t.test("a token without the route's scopes: 403, not counted, not forwarded", async (t) => {
  const token = await obtainToken(g.url, READER);
  const first = await request(token, "/v1/items");
  t.equal(first.status, 200);
  const remaining = Number(first.headers["x-ratelimit-remaining"]);
  const forwarded = upstream.received.length;

  const refused = await request(token, "/v1/items/42", "PUT");
  t.equal(refused.status, 403);
  t.strictSame(challenge(refused), {
    scheme: "Bearer",
    realm: "gatehouse",
    error: "insufficient_scope",
    error_description: "the token lacks the scopes this route needs",
    scope: "items:read items:write",
  });
  t.strictSame(json(refused), {
    error: "insufficient_scope",
    message: "this route needs a token granted every one of these scopes: items:read items:write",
    scope: "items:read items:write",
  });
  const id = String(refused.headers["x-request-id"]);
  const line = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
  t.equal(line.reason, "bearer_insufficient_scope", "the access line names the rule");
  const counted = { reason: "bearer_insufficient_scope" };
  t.equal(await metric(g, "gatehouse_auth_failures_total", counted), 1, "and the metric");
  t.equal(refused.headers["x-ratelimit-remaining"], undefined, "no limit headers");
  t.equal(upstream.received.length, forwarded, "the upstream never saw it");

  const next = await request(token, "/v1/items");
  t.equal(Number(next.headers["x-ratelimit-remaining"]), remaining - 1, "the 403 was not counted");
});

t.test("scopes_any: one of the route's scopes is enough", async (t) => {
  const reader = await obtainToken(g.url, READER, [["scope", "reports:read"]]);
  t.equal((await request(reader, "/v1/reports/2026")).status, 200, "reports:read");
  const writer = await obtainToken(g.url, WRITER, [["scope", "items:write"]]);
  t.equal((await request(writer, "/v1/reports/2026")).status, 200, "items:write");
  const neither = await obtainToken(g.url, WRITER, [["scope", "items:read"]]);
  const refused = await request(neither, "/v1/reports/2026");
  t.equal(refused.status, 403);
  t.equal(challenge(refused).scope, "reports:read items:write");
  t.match(json(refused), {
    error: "insufficient_scope",
    message: "this route needs a token granted one of these scopes: reports:read items:write",
  });
  const plain = await obtainToken(g.url, PLAIN);
  t.equal((await request(plain, "/v1/items")).status, 403, "a token without any scope");
});

t.test("the upstream receives the granted scopes and never a client's copy", async (t) => {
  const token = await obtainToken(g.url, READER, [["scope", "items:read reports:read"]]);
  const before = upstream.received.length;
  const answer = await request(token, "/v1/items", "GET", {
    "x-client-scopes": "items:write admin",
  });
  t.equal(answer.status, 200);
  t.equal(upstream.received[before]?.headers["x-client-scopes"], "items:read reports:read");

  const plain = await obtainToken(g.url, PLAIN);
  await request(plain, "/v1/open", "GET", { "X-Client-Scopes": "admin" });
  t.equal(upstream.received[before + 1]?.headers["x-client-scopes"], undefined, "none granted");

  await g.writeConfig(await yaml(""));
  t.equal(await g.gatehouse.reload(), "success");
  await request(token, "/v1/items", "GET", { "x-client-scopes": "admin" });
  const received = upstream.received[before + 2];
  t.equal(received?.headers["x-client-scopes"], undefined, 'scopes_header "" sends none');
  t.equal(received?.headers["x-client-id"], READER.id);
  await g.writeConfig(await yaml());
  await g.gatehouse.reload();
});
