/**
 * The metadata documents a client discovers gatehouse by: RFC 8414 authorization server metadata
 * and RFC 9728 protected resource metadata, built once per config from one list of members each.
 */
import { clientAuthentication, type TokenSettings } from "./settings.js";
import { secureUrl } from "../http/secure-url.js";

/** The JWKS path (RFC 8615 well-known URI). */
export const JWKS_PATH = "/.well-known/jwks.json";
/** RFC 8414 §3: the authorization server metadata's well-known path, before the issuer's path. */
export const AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server";
/** RFC 9728 §3: the protected resource metadata's well-known path. */
export const PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource";

/** The two documents and the paths they are served at. */
export interface Metadata {
  /**
   * RFC 8414 §3.1: the well-known path with the issuer's path appended; undefined in
   * resource-server-only mode, where gatehouse is no authorization server.
   */
  readonly authorizationServerPath: string | undefined;
  readonly authorizationServer: Readonly<Record<string, unknown>>;
  readonly protectedResource: Readonly<Record<string, unknown>>;
}

/** What the members are read from: the settings, the issuer's origin, the clients' methods. */
interface Source {
  readonly settings: TokenSettings;
  readonly origin: string;
  /**
   * The client authentication methods in use (RFC 8414 §2, IANA "OAuth Token Endpoint
   * Authentication Methods") and the assertions' algorithms: the same at both endpoints.
   */
  readonly auth: ReturnType<typeof clientAuthentication>;
}

/** One member: its name, and its value for a config (undefined or [] leaves it out). */
type Member = readonly [name: string, value: (source: Source) => unknown];

// RFC 8414 §2. URLs are the issuer's origin and gatehouse's own paths, whatever path the issuer
// has: gatehouse serves them at the root. The revocation endpoint (RFC 7009) authenticates its
// clients as the token endpoint does.
const AUTHORIZATION_SERVER: readonly Member[] = [
  ["issuer", ({ settings }) => settings.issuer],
  ["token_endpoint", ({ settings, origin }) => origin + settings.path],
  ["jwks_uri", ({ origin }) => origin + JWKS_PATH],
  ["grant_types_supported", () => ["client_credentials"]],
  ["token_endpoint_auth_methods_supported", ({ auth }) => auth.methods],
  ["token_endpoint_auth_signing_alg_values_supported", ({ auth }) => auth.assertionAlgorithms],
  ["scopes_supported", ({ settings }) => settings.scopes],
  ["revocation_endpoint", ({ settings, origin }) => origin + settings.revocationPath],
  ["revocation_endpoint_auth_methods_supported", ({ auth }) => auth.methods],
  ["revocation_endpoint_auth_signing_alg_values_supported", ({ auth }) => auth.assertionAlgorithms],
];

// RFC 9728 §2: tokens are accepted in the Authorization header only (RFC 6750 §2.1).
const PROTECTED_RESOURCE: readonly Member[] = [
  ["resource", ({ settings }) => settings.audience],
  // Clients such as the MCP SDK take the first: the providers, in the file's order, then
  // gatehouse itself when it issues tokens.
  [
    "authorization_servers",
    ({ settings }) => [
      ...settings.trustedIssuers.map((issuer) => issuer.issuer),
      ...(settings.ownTokens ? [settings.issuer] : []),
    ],
  ],
  ["scopes_supported", ({ settings }) => settings.scopes],
  ["bearer_methods_supported", () => ["header"]],
];

// RFC 8414 §3: members with no value are omitted, and so are empty lists.
function document(members: readonly Member[], source: Source) {
  const body: Record<string, unknown> = {};
  for (const [name, value] of members) {
    const member = value(source);
    if (member === undefined || (Array.isArray(member) && member.length === 0)) continue;
    body[name] = member;
  }
  return Object.freeze(body);
}

/**
 * The metadata for `settings`, or undefined when there is no URL it can be served for: the
 * issuer's, or in resource-server-only mode the audience's (RFC 9728 §3: the resource identifier
 * is an https URL).
 */
export function metadataOf(settings: TokenSettings): Metadata | undefined {
  // RFC 8414 §2: the issuer is an https URL without query or fragment.
  const issuer = secureUrl(settings.ownTokens ? settings.issuer : settings.audience);
  if (issuer === undefined) return undefined;
  // RFC 8414 §3.1: a terminating "/" is removed from the issuer's path before it is appended.
  const path = issuer.pathname.replace(/\/$/, "");
  const source: Source = {
    settings,
    origin: issuer.origin,
    auth: clientAuthentication(settings.clients),
  };
  return {
    authorizationServerPath: settings.ownTokens ? AUTHORIZATION_SERVER_PATH + path : undefined,
    authorizationServer: document(AUTHORIZATION_SERVER, source),
    protectedResource: document(PROTECTED_RESOURCE, source),
  };
}
