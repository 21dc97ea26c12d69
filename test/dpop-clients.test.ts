/**
 * DPoP from end to end with the clients users run: oauth4webapi and openid-client get a bound
 * token from gatehouse and call a `dpop: required` route through it with the proofs they make;
 * the same token without its proof, as Bearer, or with one of their proofs replayed or sent for
 * another URL or method, is refused with the challenge RFC 9449 §7.1 asks for.
 */
import t from "tap";
import * as oauth from "oauth4webapi";
import * as oidc from "openid-client";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { send } from "./helpers/client.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "agent-7", secret: "agent-secret-0123456789abcdef0123" };
const ALGS = 'algs="ES256 EdDSA Ed25519 PS256 RS256"';

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const routes = `routes:
  - path: /mcp
    methods: [GET, POST]
    dpop: required
  - path: /mcp/other
    methods: [GET]
    dpop: required
`;
const first = await startTestGatehouse(configFor(upstream.url, await clientsYaml([APP])));
t.teardown(() => first.close());
// The issuer is the gatehouse's own loopback URL, so that clients discover it (RFC 8414).
const issuer = new URL(`http://127.0.0.1:${first.port}`);
await first.writeConfig(
  configFor(
    upstream.url,
    `tokens:\n  issuer: ${issuer.href.replace(/\/$/, "")}\n${await clientsYaml([APP])}${routes}`,
  ),
);
t.equal(await first.gatehouse.reload(), "success");
const g = first;
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const mcp = new URL(`${g.url}/mcp`);

/** The DPoP header of every request `fetch` sends, kept in `proofs`. */
function recording(proofs: string[]): typeof fetch {
  return async (input, init) => {
    const proof = new Headers(init?.headers).get("dpop");
    if (proof !== null) proofs.push(proof);
    return fetch(input, init);
  };
}

t.test("oauth4webapi: a bound token from gatehouse calls a dpop: required route", async (t) => {
  const as = await oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }),
  );
  const client: oauth.Client = { client_id: APP.id };
  const DPoP = oauth.DPoP(client, await oauth.generateKeyPair("ES256"));
  const tokens = await oauth.processClientCredentialsResponse(
    as,
    client,
    await oauth.clientCredentialsGrantRequest(
      as,
      client,
      oauth.ClientSecretPost(APP.secret),
      {},
      { DPoP, ...insecure },
    ),
  );
  t.equal(tokens.token_type, "dpop");
  const token = tokens.access_token;
  const proofs: string[] = [];
  const options = { DPoP, ...insecure, [oauth.customFetch]: recording(proofs) };
  const before = upstream.received.length;
  const answer = await oauth.protectedResourceRequest(
    token,
    "GET",
    mcp,
    new Headers(),
    null,
    options,
  );
  t.equal(answer.status, 200, "the proof oauth4webapi made is accepted");
  const seen = upstream.received.at(-1);
  t.equal(upstream.received.length, before + 1);
  t.equal(seen?.headers["x-client-id"], APP.id);
  t.equal(seen?.headers.authorization, undefined, "no token upstream");
  t.equal(seen?.headers.dpop, undefined, "no proof upstream");
  const proof = proofs.at(-1) as string;

  const refusal = async (
    what: string,
    headers: Record<string, string>,
    error: string,
    words: RegExp,
    path = "/mcp",
    method = "GET",
  ) => {
    const refused = await send(`${g.url}${path}`, { method, headers });
    t.equal(refused.status, 401, what);
    const challenge = String(refused.headers["www-authenticate"]);
    t.match(
      challenge,
      new RegExp(`^DPoP error="${error}", error_description="[^"]*", ${ALGS}`),
      what,
    );
    t.match(JSON.parse(refused.body.toString("utf8")), { error, message: words }, what);
  };
  await refusal(
    "without its proof",
    { authorization: `DPoP ${token}` },
    "invalid_dpop_proof",
    /exactly one DPoP header/,
  );
  await refusal(
    "as Bearer",
    { authorization: `Bearer ${token}` },
    "invalid_token",
    /bound to a key/,
  );
  const dpop = { authorization: `DPoP ${token}`, dpop: proof };
  await refusal("its proof replayed", dpop, "invalid_dpop_proof", /used before/);
  await refusal("its proof for another URL", dpop, "invalid_dpop_proof", /htu/, "/mcp/other");
  await refusal("its proof for another method", dpop, "invalid_dpop_proof", /htm/, "/mcp", "POST");
  t.equal(upstream.received.length, before + 1, "no refusal reached the upstream");
});

t.test("openid-client: the same, its proofs made by getDPoPHandle", async (t) => {
  const config = await oidc.discovery(
    issuer,
    APP.id,
    APP.secret,
    oidc.ClientSecretPost(APP.secret),
    {
      algorithm: "oauth2",
      execute: [oidc.allowInsecureRequests],
    },
  );
  const DPoP = oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair("ES256"));
  const tokens = await oidc.clientCredentialsGrant(config, {}, { DPoP });
  t.equal(tokens.token_type, "dpop");
  const answer = await oidc.fetchProtectedResource(
    config,
    tokens.access_token,
    mcp,
    "GET",
    null,
    undefined,
    { DPoP },
  );
  t.equal(answer.status, 200);
  const bearer = await send(mcp.href, {
    headers: { authorization: `Bearer ${tokens.access_token}` },
  });
  t.equal(bearer.status, 401, "the bound token as Bearer");
});
