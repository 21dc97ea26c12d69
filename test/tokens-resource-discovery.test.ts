/**
 * Protected resource metadata for an audience with a path (RFC 9728 §3.1) and the challenges that
 * point to it (§5.1), driven by the clients that use them: oauth4webapi's resource discovery
 * finds the document, and the MCP TypeScript SDK follows a 401's `resource_metadata` to the
 * authorization server and gets a token with its PrivateKeyJwtProvider (typ JWT, no kid).
 */
import t from "tap";
import { withDpop } from "./helpers/challenges.js";
import * as oauth from "oauth4webapi";
import { exportJWK } from "jose";
import {
  auth,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
} from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthMetadata } from "@modelcontextprotocol/sdk/shared/auth.js";
import { PrivateKeyJwtProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { jwksFiles, keyClient, keyClientsYaml } from "./helpers/assertions.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const PR_PATH = "/.well-known/oauth-protected-resource";
const APP: TestClient = {
  id: "reporting-app",
  secret: "reporting-secret-0123456789abcdef",
  extra: ["scopes: [items:read]"],
};
const AGENT = await keyClient("mcp-agent", "ES256");

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/** The config for `issuer` and `audience`: an MCP endpoint and a route needing a scope. */
async function yaml(issuer: string, audience: string): Promise<string> {
  const secrets = (await clientsYaml([APP])).replace(/^clients:\n/, "");
  const agent = keyClientsYaml([AGENT]).replace(/\n$/, "\n    scopes: [items:read, mcp]\n");
  return configFor(
    upstream.url,
    `tokens:
  issuer: ${issuer}
  audience: ${audience}
  scopes: [items:read, items:write, mcp]
clients:
${secrets}${agent}routes:
  - path: /mcp
    methods: [GET, POST]
    scopes: [mcp]
  - path: /v1/items
    methods: [PUT]
    scopes: [items:write]
`,
  );
}

// The issuer and the audience name gatehouse's own port, known once it listens.
const g = await startTestGatehouse(await yaml("gatehouse", "upstream"), {
  files: jwksFiles([AGENT]),
});
t.teardown(() => g.close());
const ISSUER = `http://127.0.0.1:${g.port}`;
const RESOURCE = `${ISSUER}/mcp`;
const METADATA_URL = `${ISSUER}${PR_PATH}/mcp`;
await g.writeConfig(await yaml(ISSUER, RESOURCE));
t.equal(await g.gatehouse.reload(), "success");

t.test("the document of an audience with a path is served below the well-known path", async (t) => {
  const answer = await send(`${g.url}${PR_PATH}/mcp`);
  t.equal(answer.status, 200);
  t.equal(answer.headers["cache-control"], "public, max-age=300");
  t.strictSame(json(answer), {
    resource: RESOURCE,
    authorization_servers: [ISSUER],
    scopes_supported: ["items:read", "items:write", "mcp"],
    bearer_methods_supported: ["header"],
    dpop_signing_alg_values_supported: ["ES256", "EdDSA", "PS256", "RS256"],
  });
  // RFC 9728 §3.3: the root's document would name the host as the resource, which it is not.
  for (const path of [PR_PATH, `${PR_PATH}/other`, `${PR_PATH}/mcp/`]) {
    const elsewhere = await send(`${g.url}${path}`);
    t.equal(elsewhere.status, 404, path);
    t.strictSame(json(elsewhere), {
      error: "not_found",
      message: `the protected resource's metadata is served at ${PR_PATH}/mcp`,
    });
  }
});

t.test("oauth4webapi's RFC 9728 discovery finds the resource's document", async (t) => {
  const resource = new URL(RESOURCE);
  const response = await oauth.resourceDiscoveryRequest(resource, {
    [oauth.allowInsecureRequests]: true,
  });
  const metadata = await oauth.processResourceDiscoveryResponse(resource, response);
  t.equal(metadata.resource, RESOURCE);
  t.strictSame(metadata.authorization_servers, [ISSUER]);
  // And from there the authorization server's RFC 8414 document, which it checks as strictly.
  const issuer = new URL(ISSUER);
  const server = await oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, {
      algorithm: "oauth2",
      [oauth.allowInsecureRequests]: true,
    }),
  );
  t.strictSame(server.response_types_supported, []);
  t.equal(server.token_endpoint, `${ISSUER}/oauth/token`);
});

t.test("every 401 and 403 challenge carries resource_metadata", async (t) => {
  const withMetadata = (params: string) =>
    withDpop(`Bearer realm="gatehouse"${params}, resource_metadata="${METADATA_URL}"`);
  const missing = await send(`${g.url}/mcp`);
  t.equal(missing.status, 401);
  t.equal(missing.headers["www-authenticate"], withMetadata(""));
  const invalid = await send(`${g.url}/mcp`, { headers: { authorization: "Bearer abc.def.ghi" } });
  t.equal(invalid.status, 401);
  const notJwt =
    "gatehouse verifies JWT access tokens only, and this token is not a JWT it can read";
  t.equal(
    invalid.headers["www-authenticate"],
    withMetadata(`, error="invalid_token", error_description="${notJwt}"`),
  );
  const token = await obtainToken(g.url, APP);
  const forbidden = await send(`${g.url}/v1/items`, {
    method: "PUT",
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(forbidden.status, 403);
  t.equal(
    forbidden.headers["www-authenticate"],
    withMetadata(
      ', error="insufficient_scope", error_description="the token lacks the scopes this route needs", scope="items:write"',
    ),
  );
  // A malformed request is no invitation to discover: its 400 challenge stays as it was.
  const malformed = await send(`${g.url}/mcp`, { headers: { authorization: "Bearer" } });
  t.equal(malformed.status, 400);
  t.equal(
    malformed.headers["www-authenticate"],
    `Bearer realm="gatehouse", error="invalid_request", error_description="the request's bearer credentials are malformed: the Bearer scheme needs a token"`,
  );
});

t.test("the MCP SDK's PrivateKeyJwtProvider gets a token through discovery", async (t) => {
  const refused = await fetch(`${g.url}/mcp`, { method: "POST" });
  const { resourceMetadataUrl } = extractWWWAuthenticateParams(refused);
  t.equal(resourceMetadataUrl?.href, METADATA_URL, "the SDK reads the 401's resource_metadata");
  const resource = await discoverOAuthProtectedResourceMetadata(RESOURCE, { resourceMetadataUrl });
  t.equal(resource.resource, RESOURCE);
  const server = resource.authorization_servers?.[0] ?? "";
  t.equal(server, ISSUER, "the SDK takes the first authorization server");
  // The SDK's schema for RFC 8414 metadata requires authorization_endpoint, which RFC 8414 §2
  // requires only of a server with a grant that uses it; gatehouse has none and names none. The
  // SDK's discovery state carries the document as gatehouse serves it instead, and auth() runs
  // the rest: the resource's metadata, the resource indicator, the signed assertion, the token.
  const document = await fetch(`${server}/.well-known/oauth-authorization-server`);
  const serverMetadata = (await document.json()) as OAuthMetadata;
  t.notOk("authorization_endpoint" in serverMetadata);
  const keyProvider = new PrivateKeyJwtProvider({
    clientId: AGENT.id,
    privateKey: await exportJWK(AGENT.privateKey),
    algorithm: "ES256",
    expectedIssuer: ISSUER,
    scope: "mcp",
  });
  const provider = Object.assign(keyProvider, {
    discoveryState: () => ({
      authorizationServerUrl: server,
      authorizationServerMetadata: serverMetadata,
    }),
  });
  const result = await auth(provider, { serverUrl: RESOURCE, resourceMetadataUrl });
  t.equal(result, "AUTHORIZED");
  const tokens = provider.tokens();
  t.equal(tokens?.scope, "mcp");
  const before = upstream.received.length;
  const called = await fetch(`${g.url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${tokens?.access_token}` },
  });
  t.equal(called.status, 200);
  t.equal(upstream.received[before]?.headers["x-client-id"], AGENT.id);
});

t.test("without a document, challenges carry no resource_metadata", async (t) => {
  await g.writeConfig(await yaml(ISSUER, "upstream"));
  t.equal(await g.gatehouse.reload(), "success");
  const missing = await send(`${g.url}/mcp`);
  t.equal(missing.status, 401);
  t.equal(missing.headers["www-authenticate"], withDpop('Bearer realm="gatehouse"'));
});
