/**
 * A real OAuth authorization server in the test process: panva's oidc-provider (a certified
 * OpenID Provider) on 127.0.0.1, issuing JWT access tokens (RFC 9068) by client credentials for
 * one resource (RFC 8707). It is served through a thin front that counts the requests per path,
 * can answer 404 at the RFC 8414 path (as Keycloak and Entra ID, which publish only OpenID Connect
 * Discovery), can swap the provider for one with new keys (a rotation) and can stop answering.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from "jose";
import Provider from "oidc-provider";

/** A client registered at the provider. */
export interface ProviderClient {
  readonly id: string;
  readonly secret: string;
  /** The scopes it may ask for, space-separated. */
  readonly scope: string;
}

/** A signing key of the provider: the private key (to craft tokens) and its public JWK. */
export interface ProviderKey {
  readonly kid: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
  readonly privateJwk: JWK;
}

/** A running provider. */
export interface TestProvider {
  /** The issuer: http://127.0.0.1:PORT */
  readonly issuer: string;
  /** Requests received, by path (the query left out). */
  readonly hits: Map<string, number>;
  /** The key tokens are signed with now. */
  key: ProviderKey;
  /** A token for `client` (client_secret_basic), for the resource, with `scope` (default: all of the client's). */
  token(client: ProviderClient, scope?: string): Promise<string>;
  /** Starts signing with a new key and publishes only it (the old one is gone at once). */
  rotate(): Promise<void>;
  /** Stops answering: every request's connection is reset (counted) until `resume`. */
  stop(): void;
  resume(): void;
  close(): Promise<void>;
}

/** Options: the resource its tokens are for, the clients, and whether RFC 8414 is served. */
export interface ProviderOptions {
  readonly resource: string;
  readonly clients: readonly ProviderClient[];
  readonly scopes: readonly string[];
  /** Answer 404 at /.well-known/oauth-authorization-server (default false: served). */
  readonly oidcOnly?: boolean;
  /** Overrides the answer for one path (a broken or hostile provider). */
  readonly override?: (path: string, res: ServerResponse) => boolean;
}

let kidCounter = 0;

/** A new RS256 key for a provider. */
export async function providerKey(): Promise<ProviderKey> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = `key-${++kidCounter}-${Date.now().toString(36)}`;
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" };
  return { kid, privateKey, publicJwk, privateJwk };
}

function makeProvider(issuer: string, key: ProviderKey, options: ProviderOptions): Provider {
  return new Provider(issuer, {
    clients: options.clients.map((client) => ({
      client_id: client.id,
      client_secret: client.secret,
      grant_types: ["client_credentials"],
      response_types: [],
      redirect_uris: [],
      // What the MCP SDK's ClientCredentialsProvider sends.
      token_endpoint_auth_method: "client_secret_basic",
      scope: client.scope,
    })),
    jwks: { keys: [key.privateJwk] },
    scopes: [...options.scopes],
    features: {
      clientCredentials: { enabled: true },
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => options.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => {
          if (resource !== options.resource) throw new Error("unknown resource");
          return {
            scope: options.scopes.join(" "),
            audience: resource,
            accessTokenFormat: "jwt",
            accessTokenTTL: 3600,
            jwt: { sign: { alg: "RS256" } },
          };
        },
      },
    },
  } as ConstructorParameters<typeof Provider>[1]);
}

/** Starts a provider on 127.0.0.1:0. */
export async function startProvider(options: ProviderOptions): Promise<TestProvider> {
  const hits = new Map<string, number>();
  let down = false;
  let handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0] as string;
    hits.set(path, (hits.get(path) ?? 0) + 1);
    if (down) {
      req.socket.destroy();
      return;
    }
    if (options.override?.(path, res) === true) return;
    if (options.oidcOnly === true && path === "/.well-known/oauth-authorization-server") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "not_found" }));
      return;
    }
    handle?.(req, res);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;

  const use = (key: ProviderKey): void => {
    handle = makeProvider(issuer, key, options).callback();
  };
  const first = await providerKey();
  use(first);

  const testProvider: TestProvider = {
    issuer,
    hits,
    key: first,
    async token(client, scope) {
      const body = new URLSearchParams({
        grant_type: "client_credentials",
        resource: options.resource,
        scope: scope ?? client.scope,
      });
      const credentials = Buffer.from(`${client.id}:${client.secret}`).toString("base64");
      const headers = { authorization: `Basic ${credentials}` };
      const answer = await fetch(`${issuer}/token`, { method: "POST", body, headers });
      const parsed = (await answer.json()) as Record<string, unknown>;
      if (typeof parsed.access_token !== "string") {
        throw new Error(`the provider refused: ${JSON.stringify(parsed)}`);
      }
      return parsed.access_token;
    },
    async rotate() {
      const next = await providerKey();
      testProvider.key = next;
      use(next);
    },
    stop() {
      down = true;
    },
    resume() {
      down = false;
    },
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
  return testProvider;
}
