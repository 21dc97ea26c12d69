/**
 * A real OAuth client against a real gatehouse: openid-client v6 obtains tokens with
 * client_secret_basic, client_secret_post and private_key_jwt, calls a protected route with them,
 * revokes them (RFC 7009), and the tokens verify against the published JWKS with jose's
 * createLocalJWKSet.
 */
import t from "tap";
import * as oidc from "openid-client";
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { jwksFiles, keyClient, keyClientsYaml } from "./helpers/assertions.js";

// Characters that RFC 6749 §2.3.1 form-encoding changes, so Basic is exercised for real.
const APP: TestClient = { id: "reporting-app", secret: "s3cret+with:odd/chars%and spaces" };

const BATCH = await keyClient("batch-job", "ES256");

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `${await clientsYaml([APP])}${keyClientsYaml([BATCH])}routes:
  - path: /v1/reports/**
    methods: [GET]
`,
  ),
  { files: jwksFiles([BATCH]) },
);
t.teardown(() => g.close());

function configuration(auth: oidc.ClientAuth, clientId = APP.id): oidc.Configuration {
  const config = new oidc.Configuration(
    {
      issuer: "gatehouse",
      token_endpoint: `${g.url}/oauth/token`,
      revocation_endpoint: `${g.url}/oauth/revoke`,
    },
    clientId,
    undefined,
    auth,
  );
  // The test server is plain HTTP on loopback.
  oidc.allowInsecureRequests(config);
  return config;
}

for (const [name, auth] of [
  ["client_secret_basic", oidc.ClientSecretBasic(APP.secret)],
  ["client_secret_post", oidc.ClientSecretPost(APP.secret)],
] as const) {
  t.test(`openid-client obtains a token with ${name} and calls a protected route`, async (t) => {
    const tokens = await oidc.clientCredentialsGrant(configuration(auth));
    t.equal(tokens.token_type, "bearer", "openid-client lower-cases token_type");
    t.type(tokens.access_token, "string");
    t.equal(tokens.expires_in, 3600);

    const before = upstream.received.length;
    const response = await fetch(`${g.url}/v1/reports/2026`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    t.equal(response.status, 200);
    t.equal(upstream.received[before]?.headers["x-client-id"], APP.id);

    const jwks = (await (await fetch(`${g.url}/.well-known/jwks.json`)).json()) as JSONWebKeySet;
    const { payload, protectedHeader } = await jwtVerify(
      tokens.access_token,
      createLocalJWKSet(jwks),
      { issuer: "gatehouse", audience: "upstream", typ: "at+jwt", algorithms: ["EdDSA"] },
    );
    t.equal(payload.client_id, APP.id, "verified against the JWKS");
    t.equal(protectedHeader.kid, jwks.keys[0]?.kid);
  });
}

t.test("openid-client sees a wrong secret as invalid_client", async (t) => {
  const refusal = await oidc
    .clientCredentialsGrant(configuration(oidc.ClientSecretBasic("wrong")))
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  // RFC 9110 §15.5.2: the 401 carries a challenge, which openid-client reports as such.
  t.type(refusal, oidc.WWWAuthenticateChallengeError);
  const challenge = refusal as oidc.WWWAuthenticateChallengeError;
  t.equal(challenge.status, 401);
  t.match(challenge.cause, [{ scheme: "basic", parameters: { realm: "gatehouse" } }]);
  t.match(await challenge.response.json(), { error: "invalid_client" });
});

const reports = (token: string) =>
  fetch(`${g.url}/v1/reports/2026`, { headers: { authorization: `Bearer ${token}` } });

t.test("openid-client authenticates with private_key_jwt and revokes its token", async (t) => {
  const config = configuration(oidc.PrivateKeyJwt(BATCH.privateKey), BATCH.id);
  const tokens = await oidc.clientCredentialsGrant(config);
  t.equal((await reports(tokens.access_token)).status, 200);
  const again = await oidc.clientCredentialsGrant(config);
  t.not(again.access_token, tokens.access_token, "each request signs a new assertion (new jti)");
  await oidc.tokenRevocation(config, tokens.access_token);
  t.equal((await reports(tokens.access_token)).status, 401, "revoked");
  t.equal((await reports(again.access_token)).status, 200, "the other token is left alone");
});

t.test("openid-client revokes a token with client_secret_basic", async (t) => {
  const config = configuration(oidc.ClientSecretBasic(APP.secret));
  const tokens = await oidc.clientCredentialsGrant(config);
  await oidc.tokenRevocation(config, tokens.access_token, { token_type_hint: "access_token" });
  t.equal((await reports(tokens.access_token)).status, 401);
});
