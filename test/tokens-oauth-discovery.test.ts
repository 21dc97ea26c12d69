/**
 * A real OAuth client finding gatehouse by its metadata: openid-client v6 discovers the token
 * endpoint through RFC 8414 metadata on an http loopback issuer, then asks for a client-credentials
 * token with `scope` and two `resource` parameters, and calls a route that needs the scope.
 */
import t from "tap";
import * as oidc from "openid-client";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { claimsOf, clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const API = "https://api.example.com";
const REPORTS = "https://reports.example.com";
const APP: TestClient = {
  id: "reporting-app",
  secret: "reporting-secret-0123456789abcdef",
  extra: ["scopes: [items:read, reports:read]", `resources: [${API}, ${REPORTS}]`],
};

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/** The config with `issuer`; the issuer names gatehouse's own port, known once it listens. */
async function yaml(issuer: string): Promise<string> {
  return configFor(
    upstream.url,
    `tokens:
  issuer: ${issuer}
  audience: ${API}
  scopes: [items:read, reports:read]
${await clientsYaml([APP])}routes:
  - path: /v1/reports/**
    methods: [GET]
    scopes: [reports:read]
`,
  );
}

const g = await startTestGatehouse(await yaml("gatehouse"));
t.teardown(() => g.close());
const issuer = `http://127.0.0.1:${g.port}`;
await g.writeConfig(await yaml(issuer));
t.equal(await g.gatehouse.reload(), "success");

/** openid-client's configuration for APP, found through gatehouse's metadata. */
function discover(auth: oidc.ClientAuth): Promise<oidc.Configuration> {
  // The test server is plain HTTP on loopback; RFC 8414 metadata, not OpenID Connect's.
  return oidc.discovery(new URL(issuer), APP.id, undefined, auth, {
    execute: [oidc.allowInsecureRequests],
    algorithm: "oauth2",
  });
}

t.test(
  "openid-client discovers gatehouse and obtains a scoped token for two resources",
  async (t) => {
    const config = await discover(oidc.ClientSecretPost(APP.secret));
    const metadata = config.serverMetadata();
    t.equal(metadata.issuer, issuer);
    t.equal(metadata.token_endpoint, `${issuer}/oauth/token`);
    t.strictSame(metadata.scopes_supported, ["items:read", "reports:read"]);

    const tokens = await oidc.clientCredentialsGrant(
      config,
      new URLSearchParams([
        ["scope", "reports:read"],
        ["resource", API],
        ["resource", REPORTS],
      ]),
    );
    t.equal(tokens.scope, "reports:read");
    t.strictSame(claimsOf(tokens.access_token).aud, [API, REPORTS]);

    const before = upstream.received.length;
    const answer = await fetch(`${g.url}/v1/reports/2026`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    t.equal(answer.status, 200);
    t.equal(upstream.received[before]?.headers["x-client-scopes"], "reports:read");
  },
);

t.test("openid-client reads an invalid_scope refusal as an OAuth error", async (t) => {
  const config = await discover(oidc.ClientSecretBasic(APP.secret));
  const refusal = await oidc.clientCredentialsGrant(config, { scope: "items:write" }).then(
    () => undefined,
    (error: unknown) => error,
  );
  t.type(refusal, oidc.ResponseBodyError);
  t.equal((refusal as oidc.ResponseBodyError).error, "invalid_scope");
  t.equal((refusal as oidc.ResponseBodyError).status, 400);
});
