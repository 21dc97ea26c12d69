/**
 * What gatehouse refuses from a trusted issuer (RFC 8725, RFC 9068 §4; docs/identity-providers.md):
 * tokens crafted byte by byte with the provider's own RSA key, each wrong in one way, and
 * providers that answer their metadata or JWKS wrongly or with hostile content. Every refused
 * token is a 401 invalid_token naming the rule it broke, in words in its challenge and as its
 * access line's reason; a provider whose keys cannot be read answers an unknown kid 503, and so
 * does one whose refetch for a new kid waits for its cool-down (a provider rotating twice).
 */
import { createPublicKey, createHmac, generateKeyPairSync, type KeyObject } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { exportJWK, SignJWT, type JWK } from "jose";
import { json, send, eventually, type ClientResponse } from "./helpers/client.js";
import { manualClock, type ManualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { providerKey, type ProviderKey } from "./helpers/provider.js";
import { BEARER_REFUSALS, type InvalidTokenRule } from "../src/tokens/refusal-reasons.js";
import { startUpstream } from "./helpers/upstream.js";

const AUDIENCE = "https://api.example.com";
const upstream = await startUpstream();
t.teardown(() => upstream.close());

type Route = (res: ServerResponse) => void;

/** A provider's HTTP side only: each path answers as the test says, every request counted. */
async function startKeysServer(routes: Map<string, Route>) {
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = req.url ?? "/";
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const route = routes.get(path);
    if (route === undefined) {
      res.writeHead(404).end();
      return;
    }
    route(res);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  t.teardown(
    () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  );
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

const sendJson =
  (body: unknown): Route =>
  (res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

const key = await providerKey();
const routes = new Map<string, Route>();
const keys = await startKeysServer(routes);
const ISSUER = `${keys.origin}/realms/corp`;
// The JWKS also holds unusable members: a private key, an encryption key, an HMAC secret.
const { privateKey: strayPrivate } = generateKeyPairSync("ec", { namedCurve: "P-256" });
const strayJwk = { ...(await exportJWK(strayPrivate)), kid: "private-member", alg: "ES256" };
routes.set(
  "/certs",
  sendJson({
    keys: [
      key.publicJwk,
      strayJwk,
      { ...key.publicJwk, kid: "encryption-member", use: "enc" },
      { kty: "oct", k: "c2VjcmV0", kid: "hmac-member", alg: "HS256" },
    ],
  }),
);

async function gatehouseFor(
  issuers: string,
  clients = "clients:\n  - id: billing\n    issuer: corp\n",
  clock: ManualClock = manualClock(),
): Promise<TestGatehouse> {
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  audience: ${AUDIENCE}
  # Every refusal here comes from 127.0.0.1; the failure limit has its own tests.
  failure_limit: { limit: 1000, window: 1m }
  trusted_issuers:
${issuers}${clients}routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    { clock },
  );
  t.teardown(() => g.close());
  return g;
}

const clock = manualClock();
const g = await gatehouseFor(
  `    - name: corp
      issuer: ${ISSUER}
      jwks_uri: ${keys.origin}/certs
      algorithms: [RS256, ES256]
`,
  undefined,
  clock,
);
const fetched = (from: TestGatehouse, result: string, issuer = "corp") =>
  metric(from, "gatehouse_issuer_keys_fetch_total", { issuer, result });
t.ok(await eventually(async () => (await fetched(g, "ok")) === 1), "the keys are fetched");

const nowS = () => Math.floor(Date.now() / 1000);
const CLAIMS = { client_id: "billing", scope: "items:read" };

function signed(
  claims: Record<string, unknown> = CLAIMS,
  header: Record<string, unknown> = {},
  audience: string | string[] = AUDIENCE,
  issuer = ISSUER,
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: key.kid, ...header } as never)
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(key.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
const payload = () => ({ ...CLAIMS, iss: ISSUER, aud: AUDIENCE, iat: nowS(), exp: nowS() + 300 });

function call(token: string, from: TestGatehouse = g): Promise<ClientResponse> {
  return send(`${from.url}/v1/items`, { headers: { authorization: `Bearer ${token}` } });
}

/**
 * Checks that `token` sent to `from` is refused for `rule`: 401 invalid_token whose challenge and
 * message say the rule's words, its access line's reason, and nothing of the token in either.
 */
async function refused(
  t: Test,
  token: string,
  rule: InvalidTokenRule,
  what: string,
  from: TestGatehouse = g,
): Promise<ClientResponse> {
  const answer = await call(token, from);
  const words = BEARER_REFUSALS[rule];
  t.equal(answer.status, 401, what);
  t.match(json(answer), { error: "invalid_token", message: words }, what);
  // RFC 9728 §5.1: the challenge ends with where the resource's metadata is.
  t.equal(
    String(answer.headers["www-authenticate"])
      .replace(/, DPoP algs="[^"]+"$/, "")
      .replace(/, resource_metadata="[^"]+"$/, ""),
    `Bearer realm="gatehouse", error="invalid_token", error_description="${words}"`,
    what,
  );
  const id = String(answer.headers["x-request-id"]);
  const line = await from.logged((entry) => entry.requestId === id && entry.msg === "request");
  t.equal(line.reason, `bearer_${rule}`, `${what}: the access line's reason`);
  const seen = JSON.stringify([answer.rawHeaders, answer.body.toString("utf8"), line]);
  const pieces = token.split(".").filter((piece) => piece.length >= 8);
  t.notOk(
    pieces.some((piece) => seen.includes(piece)),
    `${what}: nothing of the token echoed`,
  );
  return answer;
}

t.test("a well-formed token is accepted, as the control for every refusal below", async (t) => {
  t.equal((await call(await signed())).status, 200);
  t.equal((await call(await signed(CLAIMS, { typ: "JWT" }))).status, 200, "typ JWT (Entra, Auth0)");
  t.equal((await call(await signed(CLAIMS, { typ: undefined }))).status, 200, "no typ");
  // RFC 7515 §4.1.9: a media type, in any case, with or without its application/ prefix.
  for (const typ of ["AT+JWT", "application/at+jwt", "Application/AT+JWT", "application/jwt"]) {
    t.equal((await call(await signed(CLAIMS, { typ }))).status, 200, `typ ${typ}`);
  }
  const azp = await signed({ azp: "billing", scp: ["items:read", "items:list"] });
  const before = upstream.received.length;
  t.equal((await call(azp)).status, 200, "azp when client_id is absent");
  t.equal(upstream.received[before]?.headers["x-client-scopes"], "items:read items:list", "scp");
  t.equal(upstream.received[before]?.headers["x-client-id"], "billing");
});

t.test("RFC 8725 §2.1: alg none and HS256 keyed with the public key", async (t) => {
  // Without a signature it is not even a JWS; with one, its alg is refused before any key.
  const none = `${b64({ alg: "none", typ: "at+jwt", kid: key.kid })}.${b64(payload())}`;
  await refused(t, `${none}.`, "not_a_jwt", "alg none, no signature");
  await refused(t, `${none}.AAAA`, "algorithm", "alg none");
  const pem = createPublicKey(key.privateKey as unknown as KeyObject)
    .export({ type: "spki", format: "pem" })
    .toString();
  const input = `${b64({ alg: "HS256", typ: "at+jwt", kid: key.kid })}.${b64(payload())}`;
  const mac = createHmac("sha256", pem).update(input).digest("base64url");
  await refused(t, `${input}.${mac}`, "algorithm", "HS256 with the RSA public key as the secret");
  const hmacMember = `${b64({ alg: "HS256", kid: "hmac-member" })}.${b64(payload())}`;
  const withSecret = createHmac("sha256", Buffer.from("secret"))
    .update(hmacMember)
    .digest("base64url");
  await refused(
    t,
    `${hmacMember}.${withSecret}`,
    "algorithm",
    "HS256 with a secret the JWKS published",
  );
});

t.test("a key the JWKS carries with private parts or for encryption is never used", async (t) => {
  const withPrivate = await new SignJWT(CLAIMS)
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "private-member" })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(strayPrivate);
  // The keys are fetched again for the first unknown kid, and do not hold it.
  await refused(t, withPrivate, "unknown_kid", "a member carrying d");
  // The second comes during that refetch's cool-down: 503 until the refetch made when it ends.
  const encryption = await signed(CLAIMS, { kid: "encryption-member" });
  const waiting = await call(encryption);
  t.equal(waiting.status, 503, "use: enc, during the cool-down");
  t.equal(waiting.headers["retry-after"], "30");
  clock.advance(30_000);
  t.ok(await eventually(async () => (await fetched(g, "ok")) === 3), "fetched when it ends");
  await refused(t, encryption, "unknown_kid", "use: enc, after the refetch");
});

t.test("cnf: a sender-constrained token is never taken as a bearer token", async (t) => {
  const bound = await signed({
    ...CLAIMS,
    cnf: { jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I" },
  });
  const answer = await refused(t, bound, "bound_as_bearer", "cnf.jkt");
  t.match(
    String(answer.headers["www-authenticate"]),
    'error_description="the token is bound to a key: send it with the DPoP scheme and a proof"',
  );
  const certificate = await signed({
    ...CLAIMS,
    cnf: { "x5t#S256": "bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2" },
  });
  const byCertificate = await refused(t, certificate, "binding", "cnf x5t#S256");
  t.match(
    String(byCertificate.headers["www-authenticate"]),
    'error_description="the token is bound to its key by a method gatehouse does not check (cnf)"',
  );
});

/** A token of the provider's key with `claims` exactly as given, `iss` and `aud` included. */
function withClaims(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: key.kid })
    .sign(key.privateKey);
}

t.test("wrong aud, wrong iss, another key, typ, time claims and the client claim", async (t) => {
  await refused(t, await signed(CLAIMS, {}, "https://other.example.com"), "audience", "aud");
  const otherIss = await signed(CLAIMS, {}, AUDIENCE, `${keys.origin}/realms/other`);
  await refused(t, otherIss, "issuer", "iss");
  const other = await providerKey();
  const forged = await new SignJWT(CLAIMS)
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: key.kid })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(other.privateKey);
  await refused(t, forged, "signature", "signed by another key under the provider's kid");
  await refused(t, await signed(CLAIMS, { typ: "id+jwt" }), "typ", "typ");
  // Not a string: refused as any other typ, never a 500.
  for (const typ of [123, ["at+jwt"], null, { at: "jwt" }]) {
    await refused(t, await signed(CLAIMS, { typ }), "typ", `typ ${JSON.stringify(typ)}`);
  }
  // A scope the scopes header could not carry: refused, never a 500, and never remembered.
  for (const scope of ["items:read\r\nX-Admin: yes", "items:read\u007f", "items:\u0100read"]) {
    const token = await signed({ ...CLAIMS, scope });
    await refused(t, token, "claims", `scope ${JSON.stringify(scope)}`);
    await refused(t, token, "claims", `scope ${JSON.stringify(scope)}, asked again`);
  }
  const scp = await signed({ client_id: "billing", scp: ["items:read", "a\tb"] });
  await refused(t, scp, "claims", "scp");
  const base = payload();
  await refused(t, await withClaims({ ...base, iat: nowS() + 3600 }), "not_yet_valid", "iat");
  await refused(t, await withClaims({ ...base, nbf: nowS() + 3600 }), "not_yet_valid", "nbf");
  const past = { ...base, iat: nowS() - 600, exp: nowS() - 300 };
  await refused(t, await withClaims(past), "expired", "exp in the past");
  await refused(t, await withClaims({ ...base, exp: undefined }), "claims", "no exp");
  await refused(t, await withClaims({ ...base, exp: "soon" }), "claims", "exp not a number");
  await refused(t, await withClaims({ ...base, aud: undefined }), "audience", "no aud");
  const emptyId = await signed({ client_id: "", azp: "billing" });
  await refused(t, emptyId, "claims", "empty client_id, no fallback");
  await refused(t, await signed({ client_id: 7 }), "claims", "client_id not a string");
  const stranger = await signed({ client_id: "stranger" });
  await refused(t, stranger, "client_unknown", "unlisted, the issuer has no plan");
  await refused(t, "2YotnFZFEjr1zCsicMWpAA", "not_a_jwt", "an opaque token");
});

t.test("discovery naming another issuer is a failed fetch, never a reason to use it", async (t) => {
  routes.set(
    "/.well-known/oauth-authorization-server/realms/mismatch",
    sendJson({ issuer: `${keys.origin}/realms/evil`, jwks_uri: `${keys.origin}/certs` }),
  );
  const h = await gatehouseFor(
    `    - name: corp
      issuer: ${keys.origin}/realms/mismatch
`,
  );
  t.ok(await eventually(async () => (await fetched(h, "issuer_mismatch")) === 1));
  t.equal(keys.hits.get("/realms/mismatch/.well-known/openid-configuration"), undefined);
  const token = await signed(CLAIMS, {}, AUDIENCE, `${keys.origin}/realms/mismatch`);
  const answer = await call(token, h);
  t.equal(answer.status, 503, "no keys yet: the token may be good");
  t.equal(json(answer).error, "temporarily_unavailable");
  t.ok(Number(answer.headers["retry-after"]) >= 1);
  t.ok(
    h.logs.some((line) =>
      String((line.err as { message?: string })?.message).includes("realms/evil"),
    ),
  );
});

t.test("a JWKS over 1 MiB and a redirect to another scheme are failed fetches", async (t) => {
  const padding = "x".repeat(1024 * 1024);
  routes.set("/huge", sendJson({ keys: [key.publicJwk], padding }));
  routes.set("/redirected", (res) => res.writeHead(302, { location: "file:///etc/passwd" }).end());
  const h = await gatehouseFor(
    `    - name: big
      issuer: ${keys.origin}/realms/big
      jwks_uri: ${keys.origin}/huge
    - name: moved
      issuer: ${keys.origin}/realms/moved
      jwks_uri: ${keys.origin}/redirected
      plan: moved
`,
    "plans:\n  moved:\n    rate_limit: { limit: 10, window: 1m }\n",
  );
  t.ok(await eventually(async () => (await fetched(h, "too_large", "big")) === 1));
  t.ok(await eventually(async () => (await fetched(h, "insecure_url", "moved")) === 1));
  const token = await signed(CLAIMS, {}, AUDIENCE, `${keys.origin}/realms/big`);
  t.equal((await call(token, h)).status, 503);
});

t.test("keys of one provider never verify another's tokens", async (t) => {
  routes.set("/empty", sendJson({ keys: [] as JWK[] }));
  const h = await gatehouseFor(
    `    - name: corp
      issuer: ${ISSUER}
      jwks_uri: ${keys.origin}/certs
    - name: second
      issuer: ${keys.origin}/realms/second
      jwks_uri: ${keys.origin}/empty
      plan: partner
`,
    "plans:\n  partner:\n    rate_limit: { limit: 10, window: 1m }\n",
  );
  t.ok(await eventually(async () => (await fetched(h, "ok", "second")) === 1));
  // Signed with corp's key, naming the second issuer: the second issuer's (empty) set decides.
  const token = await signed(CLAIMS, {}, AUDIENCE, `${keys.origin}/realms/second`);
  await refused(t, token, "unknown_kid", "another issuer's key", h);
});

t.test(
  "a provider rotating twice within the cool-down: 503 until the refetch, not 401",
  async (t) => {
    const [first, second, third] = [await providerKey(), await providerKey(), await providerKey()];
    let published = [first.publicJwk];
    routes.set("/rotating", (res) => sendJson({ keys: published })(res));
    const issuer = `${keys.origin}/realms/rotating`;
    const rotatingClock = manualClock();
    const h = await gatehouseFor(
      `    - name: corp
      issuer: ${issuer}
      jwks_uri: ${keys.origin}/rotating
`,
      undefined,
      rotatingClock,
    );
    t.ok(await eventually(async () => (await fetched(h, "ok")) === 1));
    const jwksHits = () => keys.hits.get("/rotating");
    const tokenOf = (signer: ProviderKey, kid = signer.kid) =>
      new SignJWT(CLAIMS)
        .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid })
        .setIssuer(issuer)
        .setAudience(AUDIENCE)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(signer.privateKey);
    t.equal((await call(await tokenOf(first), h)).status, 200);

    published = [second.publicJwk];
    t.equal(
      (await call(await tokenOf(second), h)).status,
      200,
      "the first rotation: fetched at once",
    );
    t.equal(jwksHits(), 2);

    published = [third.publicJwk];
    rotatingClock.advance(5_000);
    const early = await call(await tokenOf(third), h);
    t.equal(early.status, 503, "the second rotation, 5 s later: the refetch waits 25 s");
    t.equal(early.headers["retry-after"], "25");
    t.match(json(early), { error: "temporarily_unavailable", message: /fetched again in 25 s$/ });
    const id = String(early.headers["x-request-id"]);
    const line = await h.logged((entry) => entry.requestId === id && entry.msg === "request");
    t.equal(line.reason, "bearer_unknown_kid");
    t.equal(line.decision, "keys_unavailable", "told apart from the upstream's 5xx");
    const never = await tokenOf(third, "never-published");
    t.equal((await call(never, h)).status, 503, "a kid the provider never had waits alike");
    t.equal(jwksHits(), 2, "no fetch during the cool-down");

    rotatingClock.advance(25_000);
    t.ok(await eventually(async () => (await fetched(h, "ok")) === 3), "fetched as it ends");
    t.equal(jwksHits(), 3);
    t.equal((await call(await tokenOf(third), h)).status, 200, "the second rotation's key");
    await refused(t, never, "unknown_kid", "a kid that refetch did not bring", h);
    t.equal(jwksHits(), 3, "and no further fetch");
    const counted = await metric(h, "gatehouse_auth_failures_total", {
      reason: "bearer_unknown_kid",
    });
    t.equal(counted, 3, "the two 503s and the 401");
  },
);
