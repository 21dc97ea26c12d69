/**
 * What gatehouse refuses from a trusted issuer (RFC 8725, RFC 9068 §4; docs/identity-providers.md):
 * tokens crafted byte by byte with the provider's own RSA key, each wrong in one way, and
 * providers that answer their metadata or JWKS wrongly or with hostile content. Every refused
 * token is a 401 invalid_token; a provider whose keys cannot be read answers an unknown kid 503.
 */
import { createPublicKey, createHmac, generateKeyPairSync, type KeyObject } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import t, { type Test } from "tap";
import { exportJWK, SignJWT, type JWK } from "jose";
import { json, send, eventually, type ClientResponse } from "./helpers/client.js";
import { manualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { providerKey } from "./helpers/provider.js";
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
    { clock: manualClock() },
  );
  t.teardown(() => g.close());
  return g;
}

const g = await gatehouseFor(`    - name: corp
      issuer: ${ISSUER}
      jwks_uri: ${keys.origin}/certs
      algorithms: [RS256, ES256]
`);
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

function refused(t: Test, answer: ClientResponse, what: string): void {
  t.equal(answer.status, 401, what);
  t.equal(json(answer).error, "invalid_token", what);
  t.match(String(answer.headers["www-authenticate"]), /error="invalid_token"/, what);
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
  const none = `${b64({ alg: "none", typ: "at+jwt", kid: key.kid })}.${b64(payload())}.`;
  refused(t, await call(none), "alg none");
  const pem = createPublicKey(key.privateKey as unknown as KeyObject)
    .export({ type: "spki", format: "pem" })
    .toString();
  const input = `${b64({ alg: "HS256", typ: "at+jwt", kid: key.kid })}.${b64(payload())}`;
  const mac = createHmac("sha256", pem).update(input).digest("base64url");
  refused(t, await call(`${input}.${mac}`), "HS256 with the RSA public key as the secret");
  const hmacMember = `${b64({ alg: "HS256", kid: "hmac-member" })}.${b64(payload())}`;
  const withSecret = createHmac("sha256", Buffer.from("secret"))
    .update(hmacMember)
    .digest("base64url");
  refused(t, await call(`${hmacMember}.${withSecret}`), "HS256 with a secret the JWKS published");
});

t.test("a key the JWKS carries with private parts or for encryption is never used", async (t) => {
  const withPrivate = await new SignJWT(CLAIMS)
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "private-member" })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(strayPrivate);
  refused(t, await call(withPrivate), "a member carrying d");
  refused(t, await call(await signed(CLAIMS, { kid: "encryption-member" })), "use: enc");
});

t.test("cnf: a sender-constrained token is never taken as a bearer token", async (t) => {
  const bound = await signed({
    ...CLAIMS,
    cnf: { jkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I" },
  });
  const answer = await call(bound);
  refused(t, answer, "cnf");
  t.match(
    String(answer.headers["www-authenticate"]),
    'error_description="sender-constrained tokens are not supported"',
  );
});

t.test("wrong aud, wrong iss, another key, typ, time claims and the client claim", async (t) => {
  refused(t, await call(await signed(CLAIMS, {}, "https://other.example.com")), "aud");
  refused(t, await call(await signed(CLAIMS, {}, AUDIENCE, `${keys.origin}/realms/other`)), "iss");
  const other = await providerKey();
  const forged = await new SignJWT(CLAIMS)
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: key.kid })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(other.privateKey);
  refused(t, await call(forged), "signed by another key under the provider's kid");
  refused(t, await call(await signed(CLAIMS, { typ: "id+jwt" })), "typ");
  // Not a string: refused as any other typ, never a 500.
  for (const typ of [123, ["at+jwt"], null, { at: "jwt" }]) {
    refused(t, await call(await signed(CLAIMS, { typ })), `typ ${JSON.stringify(typ)}`);
  }
  // A scope the scopes header could not carry: refused, never a 500, and never remembered.
  for (const scope of ["items:read\r\nX-Admin: yes", "items:read\u007f", "items:\u0100read"]) {
    const token = await signed({ ...CLAIMS, scope });
    refused(t, await call(token), `scope ${JSON.stringify(scope)}`);
    refused(t, await call(token), `scope ${JSON.stringify(scope)}, asked again`);
  }
  refused(
    t,
    await call(await signed({ client_id: "billing", scp: ["items:read", "a\tb"] })),
    "scp",
  );
  const future = await new SignJWT(CLAIMS)
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: key.kid })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(nowS() + 3600)
    .setExpirationTime(nowS() + 7200)
    .sign(key.privateKey);
  refused(t, await call(future), "iat in the future");
  const noExp = await new SignJWT(CLAIMS)
    .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: key.kid })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .sign(key.privateKey);
  refused(t, await call(noExp), "no exp");
  refused(
    t,
    await call(await signed({ client_id: "", azp: "billing" })),
    "empty client_id, no fallback",
  );
  refused(t, await call(await signed({ client_id: 7 })), "client_id not a string");
  refused(
    t,
    await call(await signed({ client_id: "stranger" })),
    "unlisted, the issuer has no plan",
  );
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
  refused(t, await call(token, h), "another issuer's key");
});
