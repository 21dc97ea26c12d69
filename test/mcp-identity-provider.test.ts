/**
 * End to end, as the MCP authorization specification (2025-06) has it: an unmodified MCP server
 * built with the official MCP TypeScript SDK (Streamable HTTP, one tool) behind gatehouse, an
 * organisation's provider (oidc-provider) as the authorization server, and the SDK's own client
 * with its client-credentials provider. The client meets gatehouse's 401, finds the provider
 * through the RFC 9728 document the 401's `resource_metadata` names, gets a token from it for
 * gatehouse's audience (RFC 8707), and its `initialize` and `tools/call` are answered through
 * gatehouse.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { withDpop } from "./helpers/challenges.js";
import { z } from "zod";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { refusingPort } from "./helpers/ports.js";
import { startProvider, type ProviderClient } from "./helpers/provider.js";

// The MCP server, as its authors wrote it: no line knows about gatehouse or tokens.
function mcpServer(): McpServer {
  const server = new McpServer({ name: "inventory", version: "1.0.0" });
  server.registerTool(
    "count_items",
    { description: "Counts the items of a shelf", inputSchema: { shelf: z.string() } },
    ({ shelf }) => ({ content: [{ type: "text", text: `shelf ${shelf} holds 42 items` }] }),
  );
  return server;
}

const seenByUpstream: Array<Record<string, string | string[] | undefined>> = [];
async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  seenByUpstream.push(req.headers);
  // Stateless Streamable HTTP: one server and transport per request.
  const server = mcpServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on("close", () => void transport.close().then(() => server.close()));
  await server.connect(transport);
  await transport.handleRequest(req, res);
}
const upstream = createServer((req, res) => void handle(req, res));
await new Promise<void>((done) => upstream.listen(0, "127.0.0.1", done));
t.teardown(() => new Promise<void>((done) => upstream.close(() => done())));
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

// The audience is gatehouse's own URL: the SDK checks that the document's resource is the
// server it talks to, so gatehouse's port is chosen before it starts.
const port = await refusingPort();
const AUDIENCE = `http://127.0.0.1:${port}`;
const AGENT: ProviderClient = { id: "inventory-agent", secret: "agent-secret", scope: "mcp:tools" };
const provider = await startProvider({
  resource: AUDIENCE,
  clients: [AGENT],
  scopes: ["mcp:tools"],
});
t.teardown(() => provider.close());

const g = await startTestGatehouse(
  configFor(
    upstreamUrl,
    `tokens:
  audience: ${AUDIENCE}
  scopes: [mcp:tools]
  trusted_issuers:
    - name: corp
      issuer: ${provider.issuer}
clients:
  - id: inventory-agent
    issuer: corp
routes:
  - path: /mcp
    methods: [GET, POST, DELETE]
    scopes: [mcp:tools]
`,
  ),
  { listen: { host: "127.0.0.1", port } },
);
t.teardown(() => g.close());

// Every request the SDK's client makes, in order, with the status and challenge it got.
interface Exchange {
  readonly url: string;
  readonly status: number;
  readonly challenge: string | null;
}
function recordingFetch(exchanges: Exchange[]): FetchLike {
  return async (url, init) => {
    const response = await fetch(url, init);
    const challenge = response.headers.get("www-authenticate");
    exchanges.push({ url: String(url), status: response.status, challenge });
    return response;
  };
}

t.test(
  "the MCP SDK's client calls a tool through gatehouse with the provider's token",
  async (t) => {
    const exchanges: Exchange[] = [];
    const client = new Client({ name: "agent", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${g.url}/mcp`), {
      authProvider: new ClientCredentialsProvider({
        clientId: AGENT.id,
        clientSecret: AGENT.secret,
        scope: AGENT.scope,
        expectedIssuer: provider.issuer,
      }),
      fetch: recordingFetch(exchanges),
    });
    await client.connect(transport);
    t.equal(client.getServerVersion()?.name, "inventory", "initialize answered");
    const result = await client.callTool({ name: "count_items", arguments: { shelf: "b4" } });
    t.strictSame(result.content, [{ type: "text", text: "shelf b4 holds 42 items" }]);
    await client.close();

    t.ok((provider.hits.get("/token") ?? 0) >= 1, "the token came from the provider");
    const document = g.logs.find((line) => line.path === "/.well-known/oauth-protected-resource");
    t.equal(document?.status, 200, "the client read gatehouse's RFC 9728 document");
    const refused = g.logs.find((line) => line.path === "/mcp" && line.status === 401);
    t.ok(refused, "the first request, without a token, met the 401 challenge");
    // RFC 9728 §5.1: the 401 names the document, and the SDK reads it from there rather than
    // guessing a path-aware well-known URL for /mcp (which would answer 404 first).
    const documentUrl = `${AUDIENCE}/.well-known/oauth-protected-resource`;
    const first = exchanges.findIndex((exchange) => exchange.status === 401);
    t.strictSame(exchanges[first], {
      url: `${g.url}/mcp`,
      status: 401,
      challenge: withDpop(`Bearer realm="gatehouse", resource_metadata="${documentUrl}"`),
    });
    t.strictSame(
      exchanges[first + 1],
      { url: documentUrl, status: 200, challenge: null },
      "the next request is for the document the challenge names",
    );
    t.notOk(
      exchanges.some((exchange) => exchange.url.includes("/.well-known/oauth-protected-resource/")),
      "no well-known URL was guessed",
    );
    const last = seenByUpstream.at(-1) ?? {};
    t.equal(last["x-client-id"], "inventory-agent");
    t.equal(last["x-client-issuer"], "corp");
    t.equal(last["x-client-scopes"], "mcp:tools");
    t.equal(last.authorization, undefined, "the upstream never sees the token");
  },
);
