/**
 * A real OAuth client against a real gatehouse: openid-client v6 obtains tokens with
 * client_secret_basic and client_secret_post, calls a protected route with them, and the tokens
 * verify against the published JWKS with jose's createLocalJWKSet.
 */
import t from "tap";
import * as oidc from "openid-client";
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

// Characters that RFC 6749 §2.3.1 form-encoding changes, so Basic is exercised for real.
const APP: TestClient = { id: "reporting-app", secret: "s3cret+with:odd/chars%and spaces" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `${await clientsYaml([APP])}routes:
  - path: /v1/reports/**
    methods: [GET]
`,
  ),
);
t.teardown(() => g.close());

function configuration(auth: oidc.ClientAuth): oidc.Configuration {
  const config = new oidc.Configuration(
    { issuer: "gatehouse", token_endpoint: `${g.url}/oauth/token` },
    APP.id,
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
