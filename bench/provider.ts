/**
 * `provider`: the full request with an identity provider's RS256 token beside the same request
 * with gatehouse's own EdDSA token, both through the same two gatehouse processes, which trust
 * the provider and list its client with the plan and scope of the full scenario's client. The
 * provider is a JWKS this process serves; the token is signed here as the provider would sign
 * it. Verified tokens are remembered, so the two cost the same once each is known: the ratio
 * is the price of a provider's token on the request path.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { FULL_HEADERS, FULL_PATH, fullRequest, SCOPE, type Pairing } from "./scenarios.js";
import type { Shared } from "./shared.js";

const PROVIDER_CLIENT = "partner-app";

/** Serves one RS256 key as a JWKS on 127.0.0.1:0 and signs tokens with it. */
async function startJwks(): Promise<{ issuer: string; token: () => Promise<string> }> {
  const { privateKey, publicKey } = await generateKeyPair("RS256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "bench-rs256", alg: "RS256", use: "sig" };
  const body = JSON.stringify({ keys: [jwk] });
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" }).end(body);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  // The bench ends when its measurements do, whatever the server still has open.
  server.unref();
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const token = () =>
    new SignJWT({ client_id: PROVIDER_CLIENT, scope: SCOPE })
      .setProtectedHeader({ alg: "RS256", typ: "at+jwt", kid: jwk.kid })
      .setIssuer(issuer)
      .setAudience("upstream")
      .setIssuedAt()
      .setExpirationTime("1d")
      .sign(privateKey);
  return { issuer, token };
}

/** Starts the provider's JWKS and two gatehouse processes trusting it; pairs the two tokens. */
export async function prepareProvider(shared: Shared): Promise<Pairing> {
  const jwks = await startJwks();
  const pair = await shared.variants("gatehouse trusting a provider", {
    tokens: `  trusted_issuers:
    - name: corp
      issuer: ${jwks.issuer}
      jwks_uri: ${jwks.issuer}/jwks
      algorithms: [RS256]
`,
    clients: `  - id: ${PROVIDER_CLIENT}
    issuer: corp
    plan: bench
    scopes: [${SCOPE}]
`,
  });
  const own = await fullRequest(pair[0], shared.secrets);
  const providerHeaders = { ...FULL_HEADERS, authorization: `Bearer ${await jwks.token()}` };
  return {
    // The two processes swap the two kinds of token from round to round, as in `language`.
    baseline: {
      label: "gatehouse, own EdDSA token",
      served: pair,
      path: own.path,
      headers: own.headers,
    },
    candidate: {
      label: "gatehouse, provider's RS256 token",
      served: [pair[1], pair[0]],
      path: FULL_PATH,
      headers: providerHeaders,
    },
  };
}
