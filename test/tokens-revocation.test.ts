/**
 * Token revocation (RFC 7009) through real sockets, in one replica: a client revokes its own
 * token, by secret or by assertion, and bearer enforcement refuses it until its exp; the answer is
 * 200 `{}` whatever the token; another client's token is left alone; a private_key_jwt client's
 * scoped token is granted, judged by its route's scopes, then revoked.
 */
import t from "tap";
import { withDpop } from "./helpers/challenges.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";
import { send } from "./helpers/client.js";
import { basic, clientsYaml, obtainToken } from "./helpers/tokens.js";
import {
  assertion,
  assertionRequest,
  JWT_BEARER,
  jwksFiles,
  keyClient,
  keyClientsYaml,
  postForm,
  revokeWithSecret,
} from "./helpers/assertions.js";

const START = Date.UTC(2026, 0, 5, 12);
let clock = START;
const now = (): number => clock;
const APP = { id: "reporting-app", secret: "a3f1c9d2e8b7a6f5c4d3e2f1a0b9c8d7" };
const OTHER = { id: "other-app", secret: "0f1e2d3c4b5a69788796a5b4c3d2e1f0" };
const batch = await keyClient("batch-job", "EdDSA");

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `tokens:
  ttl: 10m
${await clientsYaml([APP, OTHER])}${keyClientsYaml([batch])}routes:
  - path: /v1/items
    methods: [GET]
`,
  ),
  { now, files: jwksFiles([batch]) },
);
t.teardown(() => g.close());

const call = (token: string) =>
  send(`${g.url}/v1/items`, { headers: { authorization: `Bearer ${token}` } });

t.test("a revoked token is refused with invalid_token until it expires", async (t) => {
  const token = await obtainToken(g.url, APP);
  t.equal((await call(token)).status, 200, "accepted (and cached) before");
  const forwarded = upstream.received.length;
  const revoked = await revokeWithSecret(g.url, APP, token);
  t.equal(revoked.status, 200);
  t.strictSame(revoked.json, {});
  t.equal(revoked.headers["cache-control"], "no-store");
  const refused = await call(token);
  t.equal(refused.status, 401);
  t.equal(
    refused.headers["www-authenticate"],
    withDpop(
      'Bearer realm="gatehouse", error="invalid_token", error_description="the token has been revoked"',
    ),
  );
  const id = String(refused.headers["x-request-id"]);
  const line = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
  t.equal(line.reason, "bearer_revoked", "the access line names the rule");
  t.equal(upstream.received.length, forwarded, "neither revocation nor refusal was forwarded");
  t.equal((await revokeWithSecret(g.url, APP, token)).status, 200, "revoking again is fine");
  t.equal((await call(await obtainToken(g.url, APP))).status, 200, "a new token works");
});

t.test("another client's token, or no valid token, is answered 200 and left alone", async (t) => {
  const theirs = await obtainToken(g.url, OTHER);
  const answer = await revokeWithSecret(g.url, APP, theirs);
  t.equal(answer.status, 200);
  t.strictSame(answer.json, {});
  t.equal((await call(theirs)).status, 200, "still accepted");
  for (const token of ["garbage", `${theirs.slice(0, -4)}AAAA`]) {
    const junk = await revokeWithSecret(g.url, APP, token);
    t.equal(junk.status, 200, token.slice(0, 12));
    t.strictSame(junk.json, {});
  }
});

t.test("token_type_hint is only a hint", async (t) => {
  const token = await obtainToken(g.url, APP);
  for (const hint of ["refresh_token", "access_token", "something_else"]) {
    const answer = await postForm(
      g.url,
      "/oauth/revoke",
      [
        ["token", token],
        ["token_type_hint", hint],
      ],
      { authorization: basic(APP.id, APP.secret) },
    );
    t.equal(answer.status, 200, hint);
  }
  t.equal((await call(token)).status, 401);
});

t.test("a private_key_jwt client revokes with an assertion", async (t) => {
  const issued = await assertionRequest(g.url, await assertion(batch, now(), "gatehouse"));
  const token = issued.json.access_token as string;
  t.equal((await call(token)).status, 200);
  const answer = await postForm(g.url, "/oauth/revoke", [
    ["token", token],
    ["client_assertion_type", JWT_BEARER],
    ["client_assertion", await assertion(batch, now(), "gatehouse")],
  ]);
  t.equal(answer.status, 200);
  t.equal((await call(token)).status, 401);
});

t.test("the revocation endpoint authenticates, needs token, and takes POST only", async (t) => {
  const token = await obtainToken(g.url, APP);
  const wrong = await revokeWithSecret(g.url, { id: APP.id, secret: "wrong" }, token);
  t.equal(wrong.status, 401);
  t.equal(wrong.json.error, "invalid_client");
  const anonymous = await postForm(g.url, "/oauth/revoke", [["token", token]]);
  t.equal(anonymous.status, 401);
  t.equal((await call(token)).status, 200, "an unauthenticated revocation changes nothing");
  const missing = await postForm(g.url, "/oauth/revoke", [], {
    authorization: basic(APP.id, APP.secret),
  });
  t.equal(missing.status, 400);
  t.equal(missing.json.error, "invalid_request");
  const get = await send(`${g.url}/oauth/revoke`);
  t.equal(get.status, 405);
  t.equal(get.headers.allow, "POST");
  const big = await send(`${g.url}/oauth/revoke`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: `token=${"a".repeat(9000)}`,
  });
  t.equal(big.status, 413);
});

t.test("a revocation ends with the token: the jti is freed after exp", async (t) => {
  const token = await obtainToken(g.url, APP);
  await revokeWithSecret(g.url, APP, token);
  t.equal((await call(token)).status, 401);
  clock += 11 * 60_000;
  const expired = await call(token);
  t.equal(expired.status, 401, "expired now, not revoked");
  t.match(String(expired.body), /expired/);
});

t.test("a private_key_jwt client's scoped token: granted, judged, then revoked", async (t) => {
  const scoped = await keyClient("scoped-job", "ES256");
  const s = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  ttl: 10m
  scopes: [items:read, reports:read]
clients:
  - id: scoped-job
    jwks_file: ./scoped-job.jwks.json
    scopes: [items:read]
routes:
  - path: /v1/items
    methods: [GET]
    scopes: [items:read]
  - path: /v1/reports
    methods: [GET]
    scopes: [reports:read]
`,
    ),
    { now, files: jwksFiles([scoped]) },
  );
  t.teardown(() => s.close());
  const get = (path: string, token: string) =>
    send(`${s.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  const byAssertion = async (more: ReadonlyArray<[string, string]>) =>
    assertionRequest(s.url, await assertion(scoped, now(), "gatehouse"), more);

  const refused = await byAssertion([["scope", "reports:read"]]);
  t.equal(refused.status, 400);
  t.equal(refused.json.error, "invalid_scope", "a scope the client was not given");
  const issued = await byAssertion([["scope", "items:read"]]);
  t.equal(issued.status, 200);
  t.equal(issued.json.scope, "items:read");
  const token = issued.json.access_token as string;
  const before = upstream.received.length;
  t.equal((await get("/v1/items", token)).status, 200);
  t.equal(upstream.received[before]?.headers["x-client-scopes"], "items:read");
  t.equal((await get("/v1/reports", token)).status, 403, "insufficient_scope");

  const revoked = await postForm(s.url, "/oauth/revoke", [
    ["token", token],
    ["client_assertion_type", JWT_BEARER],
    ["client_assertion", await assertion(scoped, now(), "gatehouse")],
  ]);
  t.equal(revoked.status, 200);
  for (const path of ["/v1/items", "/v1/reports"]) {
    const answer = await get(path, token);
    t.equal(answer.status, 401, `${path}: revoked before its scopes are judged`);
    t.match(answer.headers["www-authenticate"], /error_description="the token has been revoked"/);
  }
  t.equal(upstream.received.length, before + 1, "only the first call was forwarded");
});
