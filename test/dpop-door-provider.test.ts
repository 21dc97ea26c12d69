/**
 * A provider's DPoP-bound token at the door: panva's oidc-provider, with its DPoP feature, issues
 * a JWT access token (RFC 9068) by client credentials for gatehouse's URL as the resource (RFC
 * 8707), bound to the key of the DPoP proof oauth4webapi sent to its token endpoint (RFC 9449
 * §5). gatehouse, trusting the provider, accepts that token with oauth4webapi's proof at its door
 * (the path a real client such as an MCP one takes) and refuses it without one, or as Bearer.
 * oauth4webapi reads gatehouse's challenges, and follows its DPoP-Nonce when nonces are required.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import * as oauth from "oauth4webapi";
import Provider from "oidc-provider";
import { calculateJwkThumbprint, exportJWK } from "jose";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";
import { BEARER_REFUSALS } from "../src/tokens/refusal-reasons.js";
import { eventually } from "./helpers/client.js";
import { dpopHeaders, dpopKey, proof, refusal, refusedAs, type RouteKind } from "./helpers/dpop.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { providerKey } from "./helpers/provider.js";
import { claimsOf } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const CLIENT = { id: "billing", secret: "billing-secret" };
const PATHS: Record<RouteKind, string> = { optional: "/v1/items", required: "/v1/bound" };
const INSECURE = { [oauth.allowInsecureRequests]: true };
const PR_PATH = "/.well-known/oauth-protected-resource";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

// gatehouse's own URL is the resource its tokens are for, known once it listens.
let resource = "";
const key = await providerKey();
const server = createServer();
await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const provider = new Provider(issuer, {
  clients: [
    {
      client_id: CLIENT.id,
      client_secret: CLIENT.secret,
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: "client_secret_basic",
      scope: "items:read",
    },
  ],
  jwks: { keys: [key.privateJwk] },
  scopes: ["items:read"],
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: false },
    dPoP: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx: unknown, asked: string) => {
        if (asked !== resource) throw new Error("unknown resource");
        return {
          scope: "items:read",
          audience: resource,
          accessTokenFormat: "jwt",
          accessTokenTTL: 3600,
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
} as ConstructorParameters<typeof Provider>[1]);
server.on("request", provider.callback());
t.teardown(
  () =>
    new Promise<void>((done) => {
      server.closeAllConnections();
      server.close(() => done());
    }),
);

const yaml = (audience: string, dpop = "") =>
  configFor(
    upstream.url,
    `tokens:
  audience: ${audience}
${dpop}  trusted_issuers:
    - name: corp
      issuer: ${issuer}
clients:
  - id: ${CLIENT.id}
    issuer: corp
routes:
  - path: /v1/items
    methods: [GET]
  - path: /v1/bound
    methods: [GET]
    dpop: required
`,
  );
const NONCE_ENV = { DPOP_NONCE_SECRET: "a-nonce-secret-of-at-least-thirty-two-bytes" };
const g = await startTestGatehouse(yaml("upstream"), { env: NONCE_ENV });
t.teardown(() => g.close());
resource = `http://127.0.0.1:${g.port}`;
// Every challenge points to the protected resource metadata (RFC 9728 §5.1).
const TAIL = `, resource_metadata="${resource}${PR_PATH}"`;
await g.writeConfig(yaml(resource));
// Checked once the client is set up: an assertion here would end the file's tests early.
const reloaded = await g.gatehouse.reload();

// The client: the provider found by discovery, a DPoP key pair, a handle signing its proofs.
const as = await oauth.processDiscoveryResponse(
  new URL(issuer),
  await oauth.discoveryRequest(new URL(issuer), { algorithm: "oidc", ...INSECURE }),
);
const client: oauth.Client = { client_id: CLIENT.id };
const pair = await oauth.generateKeyPair("ES256");
const DPoP = oauth.DPoP(client, pair);

/** A token from the provider: bound to the handle's key when `bound`, else a plain one. */
async function providerToken(bound: boolean): Promise<oauth.TokenEndpointResponse> {
  const response = await oauth.clientCredentialsGrantRequest(
    as,
    client,
    oauth.ClientSecretBasic(CLIENT.secret),
    { resource, scope: "items:read" },
    bound ? { DPoP, ...INSECURE } : INSECURE,
  );
  return oauth.processClientCredentialsResponse(as, client, response);
}

/** A resource request through gatehouse as oauth4webapi makes it, with the handle's proof. */
const request = (token: string, path: string, withProof = true) =>
  oauth.protectedResourceRequest(
    token,
    "GET",
    new URL(`${g.url}${path}`),
    undefined,
    undefined,
    withProof ? { DPoP, ...INSECURE } : INSECURE,
  );

/** The challenges oauth4webapi read from a refusal, or the status of an answer without one. */
async function challenged(call: Promise<Response>): Promise<unknown> {
  try {
    return (await call).status;
  } catch (error) {
    if (!(error instanceof oauth.WWWAuthenticateChallengeError)) throw error;
    return { status: error.status, challenges: error.cause };
  }
}

t.test("the provider binds its token to the key of the proof at its token endpoint", async (t) => {
  t.equal(reloaded, "success", "gatehouse's URL as its audience");
  const fetched = () =>
    metric(g, "gatehouse_issuer_keys_fetch_total", { issuer: "corp", result: "ok" });
  t.ok(await eventually(async () => (await fetched()) >= 1), "the provider's keys, discovered");
  const answer = await providerToken(true);
  t.equal(answer.token_type, "dpop");
  const claims = claimsOf(answer.access_token);
  const jwk = await exportJWK(pair.publicKey);
  t.match(claims, { iss: issuer, aud: resource, client_id: CLIENT.id, scope: "items:read" });
  t.strictSame(claims.cnf, { jkt: await calculateJwkThumbprint(jwk) }, "cnf.jkt: our key");
});

t.test(
  "accepted with oauth4webapi's proof on both routes; the upstream sees neither",
  async (t) => {
    const { access_token: token } = await providerToken(true);
    for (const kind of ["optional", "required"] as const) {
      const before = upstream.received.length;
      const response = await request(token, PATHS[kind]);
      t.equal(response.status, 200, kind);
      const seen = upstream.received[before]?.headers ?? {};
      t.equal(seen["x-client-id"], CLIENT.id, `${kind}: the provider's client`);
      t.equal(seen["x-client-issuer"], "corp", `${kind}: its issuer`);
      t.notOk("authorization" in seen, `${kind}: no Authorization`);
      t.notOk("dpop" in seen, `${kind}: no DPoP`);
    }
  },
);

t.test("refused without its proof, as Bearer, or with another key's proof", async (t) => {
  const { access_token: token } = await providerToken(true);
  const before = upstream.received.length;
  for (const kind of ["optional", "required"] as const) {
    const path = PATHS[kind];
    t.strictSame(
      await refusal(g, path, dpopHeaders(token, undefined)),
      refusedAs(kind, "invalid_dpop_proof", "dpop_header", PROOF_RULES.header, true, TAIL),
      `${kind}: the DPoP scheme without a proof`,
    );
    const words = BEARER_REFUSALS.bound_as_bearer;
    t.strictSame(
      await refusal(g, path, { authorization: `Bearer ${token}` }),
      refusedAs(kind, "invalid_token", "bound_as_bearer", words, false, TAIL),
      `${kind}: as Bearer`,
    );
    const other = await dpopKey();
    const foreign = await proof(other, {
      htm: "GET",
      htu: `${resource}${path}`,
      iat: Math.floor(Date.now() / 1000),
      token,
    });
    t.strictSame(
      await refusal(g, path, dpopHeaders(token, foreign)),
      refusedAs(kind, "invalid_dpop_proof", "dpop_key", PROOF_RULES.key, true, TAIL),
      `${kind}: another key's proof`,
    );
  }
  // oauth4webapi without its DPoP handle sends the token as Bearer, and reads the challenges.
  const metadata = `${resource}${PR_PATH}`;
  t.strictSame(await challenged(request(token, "/v1/items", false)), {
    status: 401,
    challenges: [
      {
        scheme: "bearer",
        parameters: {
          realm: "gatehouse",
          error: "invalid_token",
          error_description: BEARER_REFUSALS.bound_as_bearer,
          resource_metadata: metadata,
        },
      },
      { scheme: "dpop", parameters: { algs: "ES256 EdDSA PS256 RS256" } },
    ],
  });
  t.equal(upstream.received.length, before, "nothing forwarded");
});

t.test(
  "a plain token of the provider: Bearer where DPoP is optional, not where required",
  async (t) => {
    const answer = await providerToken(false);
    t.equal(answer.token_type.toLowerCase(), "bearer");
    t.equal(claimsOf(answer.access_token).cnf, undefined, "not bound");
    t.equal((await request(answer.access_token, "/v1/items", false)).status, 200);
    t.strictSame(await challenged(request(answer.access_token, "/v1/bound", false)), {
      status: 401,
      challenges: [
        {
          scheme: "dpop",
          parameters: {
            error: "invalid_token",
            error_description: BEARER_REFUSALS.dpop_required,
            algs: "ES256 EdDSA PS256 RS256",
            resource_metadata: `${resource}${PR_PATH}`,
          },
        },
      ],
    });
    const own = await proof(await dpopKey(), {
      htm: "GET",
      htu: `${resource}/v1/items`,
      iat: Math.floor(Date.now() / 1000),
      token: answer.access_token,
    });
    t.strictSame(
      await refusal(g, "/v1/items", dpopHeaders(answer.access_token, own)),
      refusedAs("optional", "invalid_token", "not_bound", BEARER_REFUSALS.not_bound, true, TAIL),
      "with the DPoP scheme",
    );
  },
);

t.test("nonces required: oauth4webapi follows DPoP-Nonce and retries", async (t) => {
  await g.writeConfig(
    yaml(resource, "  dpop: { nonce: true, nonce_secret_env: DPOP_NONCE_SECRET }\n"),
  );
  t.equal(await g.gatehouse.reload(), "success");
  const { access_token: token } = await providerToken(true);
  let error: unknown;
  try {
    await request(token, "/v1/bound");
  } catch (caught) {
    error = caught;
  }
  t.ok(oauth.isDPoPNonceError(error), "the first request: use_dpop_nonce");
  const before = upstream.received.length;
  const retried = await request(token, "/v1/bound");
  t.equal(retried.status, 200, "the retry, with the nonce the handle kept");
  t.equal(upstream.received.length, before + 1);
  t.equal((await request(token, "/v1/items")).status, 200, "and the next request");
});
