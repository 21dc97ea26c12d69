/**
 * Authorization server metadata (RFC 8414) and protected resource metadata (RFC 9728) through
 * real sockets (docs/tokens.md, Metadata): each document member by member, the issuer-with-path
 * form, private_key_jwt, the revocation endpoint and the DPoP proof algorithms listed, empty
 * members left out but the required response_types_supported, 404s saying why for an issuer or an
 * audience that is no https URL, http on loopback accepted, and neither path ever forwarded or
 * counted.
 */
import t from "tap";
import { exportJWK, generateKeyPair } from "jose";
import { json, send } from "./helpers/client.js";
import { anonymousOpenRoute, configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { jwksFiles, keyClient, keyClientsYaml } from "./helpers/assertions.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "reporting-secret-0123456789abcdef" };
const AS_PATH = "/.well-known/oauth-authorization-server";
const PR_PATH = "/.well-known/oauth-protected-resource";
// RFC 9449 §5.1: tokens.dpop.algorithms, by default.
const DPOP_ALGORITHMS = ["ES256", "EdDSA", "PS256", "RS256"];
// private_key_jwt clients: one key each for ES256 and EdDSA, and an RSA key without `alg`.
const ES = await keyClient("batch-es", "ES256");
const ED = await keyClient("batch-ed", "EdDSA");
const RSA_JWKS = JSON.stringify({
  keys: [await exportJWK((await generateKeyPair("RS256", { modulusLength: 2048 })).publicKey)],
});

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/** A config whose `tokens` section is `tokens`, with APP listed when `withClient`. */
async function yaml(tokens: string, withClient: boolean | string = true): Promise<string> {
  const clients =
    typeof withClient === "string"
      ? `clients:\n${withClient}`
      : withClient
        ? await clientsYaml([APP])
        : "";
  // An anonymous route over the whole /.well-known/ tree: the metadata paths must still be
  // gatehouse's own, never forwarded and never counted.
  return configFor(
    upstream.url,
    `tokens:
${tokens}${clients}plans:
${anonymousOpenRoute(100)}  - path: /.well-known/**
    methods: [GET, HEAD, POST]
    auth: none
`,
  );
}

const g = await startTestGatehouse(
  await yaml(`  issuer: https://auth.example.com/t/
  audience: https://api.example.com
  path: /oauth2/token
  scopes: [items:read, reports:read]
`),
  { files: { ...jwksFiles([ES, ED]), "batch-rsa.jwks.json": RSA_JWKS } },
);
t.teardown(() => g.close());

async function use(tokens: string, withClient: boolean | string = true): Promise<void> {
  await g.writeConfig(await yaml(tokens, withClient));
  t.equal(await g.gatehouse.reload(), "success", "reloaded");
}

t.test("authorization server metadata: RFC 8414 §2 members, issuer with a path", async (t) => {
  const before = upstream.received.length;
  const answer = await send(`${g.url}${AS_PATH}/t`);
  t.equal(answer.status, 200);
  t.equal(answer.headers["content-type"], "application/json");
  t.equal(answer.headers["cache-control"], "public, max-age=300");
  t.equal(answer.headers["x-ratelimit-remaining"], undefined, "not counted");
  t.strictSame(json(answer), {
    issuer: "https://auth.example.com/t/",
    token_endpoint: "https://auth.example.com/oauth2/token",
    jwks_uri: "https://auth.example.com/.well-known/jwks.json",
    response_types_supported: [],
    grant_types_supported: ["client_credentials"],
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    scopes_supported: ["items:read", "reports:read"],
    revocation_endpoint: "https://auth.example.com/oauth/revoke",
    revocation_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
  });
  const head = await send(`${g.url}${AS_PATH}/t`, { method: "HEAD" });
  t.equal(head.status, 200);
  t.equal(head.body.length, 0);
  const post = await send(`${g.url}${AS_PATH}/t`, { method: "POST" });
  t.equal(post.status, 405);
  t.equal(post.headers.allow, "GET, HEAD");
  // RFC 8414 §3.1: with a path in the issuer, the bare well-known path is not its metadata.
  const bare = await send(`${g.url}${AS_PATH}`);
  t.equal(bare.status, 404);
  t.strictSame(json(bare), {
    error: "not_found",
    message: `the authorization server's metadata is served at ${AS_PATH}/t`,
  });
  t.equal(upstream.received.length, before, "none of them was forwarded");
});

t.test("protected resource metadata: RFC 9728 §2 members", async (t) => {
  const before = upstream.received.length;
  const answer = await send(`${g.url}${PR_PATH}`);
  t.equal(answer.status, 200);
  t.equal(answer.headers["cache-control"], "public, max-age=300");
  t.strictSame(json(answer), {
    resource: "https://api.example.com",
    authorization_servers: ["https://auth.example.com/t/"],
    scopes_supported: ["items:read", "reports:read"],
    bearer_methods_supported: ["header"],
    dpop_signing_alg_values_supported: ["ES256", "EdDSA", "PS256", "RS256"],
  });
  t.equal(upstream.received.length, before, "not forwarded");
  const other = await send(`${g.url}/.well-known/other`);
  t.equal(other.status, 200, "the rest of /.well-known/ is the route's");
  t.equal(upstream.received.length, before + 1);
});

t.test("empty members are left out; http is served on a loopback issuer", async (t) => {
  await use(
    `  issuer: http://localhost:8080
  audience: http://127.0.0.1:8080
`,
    false,
  );
  const server = json(await send(`${g.url}${AS_PATH}`));
  t.strictSame(server, {
    issuer: "http://localhost:8080",
    token_endpoint: "http://localhost:8080/oauth/token",
    jwks_uri: "http://localhost:8080/.well-known/jwks.json",
    response_types_supported: [],
    grant_types_supported: ["client_credentials"],
    revocation_endpoint: "http://localhost:8080/oauth/revoke",
    dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
  });
  t.strictSame(json(await send(`${g.url}${PR_PATH}`)), {
    resource: "http://127.0.0.1:8080",
    authorization_servers: ["http://localhost:8080"],
    bearer_methods_supported: ["header"],
    dpop_signing_alg_values_supported: ["ES256", "EdDSA", "PS256", "RS256"],
  });
});

t.test("an audience that is no https URL has no protected resource metadata", async (t) => {
  for (const audience of ["upstream", "api://items", "http://api.example.com", "https://a/?x=1"]) {
    await use(`  issuer: https://auth.example.com
  audience: "${audience}"
`);
    const answer = await send(`${g.url}${PR_PATH}`);
    t.equal(answer.status, 404, audience);
    t.strictSame(json(answer), {
      error: "not_found",
      message:
        "protected resource metadata is served only when tokens.audience is an https URL (http on a loopback host) without a query or fragment",
    });
    t.equal((await send(`${g.url}${AS_PATH}`)).status, 200, "the issuer's document is served");
  }
});

t.test("private_key_jwt clients: the method and its algorithms at both endpoints", async (t) => {
  const rsa = "  - id: batch-rsa\n    jwks_file: ./batch-rsa.jwks.json\n";
  // Secrets and keys side by side: every method, the keys' algorithms sorted and listed once.
  await use(
    `  issuer: https://auth.example.com
  revocation_path: /oauth2/revoke
`,
    `${(await clientsYaml([APP])).replace(/^clients:\n/, "")}${keyClientsYaml([ED, ES])}${rsa}`,
  );
  const methods = ["client_secret_basic", "client_secret_post", "private_key_jwt"];
  const algorithms = ["ES256", "EdDSA", "PS256", "RS256"];
  t.strictSame(json(await send(`${g.url}${AS_PATH}`)), {
    issuer: "https://auth.example.com",
    token_endpoint: "https://auth.example.com/oauth/token",
    jwks_uri: "https://auth.example.com/.well-known/jwks.json",
    response_types_supported: [],
    grant_types_supported: ["client_credentials"],
    token_endpoint_auth_methods_supported: methods,
    token_endpoint_auth_signing_alg_values_supported: algorithms,
    revocation_endpoint: "https://auth.example.com/oauth2/revoke",
    revocation_endpoint_auth_methods_supported: methods,
    revocation_endpoint_auth_signing_alg_values_supported: algorithms,
    dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
  });
  // Keys only: no secret method is claimed.
  await use(
    `  issuer: https://auth.example.com
`,
    keyClientsYaml([ES]),
  );
  t.strictSame(json(await send(`${g.url}${AS_PATH}`)), {
    issuer: "https://auth.example.com",
    token_endpoint: "https://auth.example.com/oauth/token",
    jwks_uri: "https://auth.example.com/.well-known/jwks.json",
    response_types_supported: [],
    grant_types_supported: ["client_credentials"],
    token_endpoint_auth_methods_supported: ["private_key_jwt"],
    token_endpoint_auth_signing_alg_values_supported: ["ES256"],
    revocation_endpoint: "https://auth.example.com/oauth/revoke",
    revocation_endpoint_auth_methods_supported: ["private_key_jwt"],
    revocation_endpoint_auth_signing_alg_values_supported: ["ES256"],
    dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
  });
});

t.test("the DPoP proof algorithms are tokens.dpop.algorithms", async (t) => {
  await use(`  issuer: https://auth.example.com
  dpop: { algorithms: [ES256, PS384] }
`);
  const server = json(await send(`${g.url}${AS_PATH}`));
  t.strictSame(server.dpop_signing_alg_values_supported, ["ES256", "PS384"]);
});

t.test("an issuer that is no https URL (nor http on loopback) serves no metadata", async (t) => {
  const https = "an https URL (http on a loopback host) without a query or fragment";
  for (const issuer of ["gatehouse", "http://auth.example.com", "https://auth.example.com/?a=1"]) {
    await use(`  issuer: "${issuer}"
  audience: https://api.example.com
`);
    const before = upstream.received.length;
    for (const path of [AS_PATH, `${AS_PATH}/t`]) {
      const answer = await send(`${g.url}${path}`);
      t.equal(answer.status, 404, `${issuer}: ${path}`);
      t.strictSame(json(answer), {
        error: "not_found",
        message: `authorization server metadata is served only when tokens.issuer is ${https}`,
      });
    }
    const resource = await send(`${g.url}${PR_PATH}`);
    t.equal(resource.status, 404, `${issuer}: ${PR_PATH}`);
    t.strictSame(json(resource), {
      error: "not_found",
      message: `protected resource metadata is served only when tokens.issuer, its authorization server, is ${https}`,
    });
    t.equal(upstream.received.length, before, "never forwarded");
  }
  const token = await send(`${g.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: `client_id=${APP.id}&client_secret=${APP.secret}`,
  });
  t.equal(token.status, 200, "a plain issuer still issues tokens");
});
