/**
 * The metadata documents a client discovers gatehouse by: RFC 8414 authorization server metadata
 * and RFC 9728 protected resource metadata, built once per config from one list of members each.
 */
import { canonicalTarget, PATH_REJECTION_MESSAGES } from "../http/path.js";
import { clientAuthentication, type TokenSettings } from "./settings.js";
import { secureUrl } from "../http/secure-url.js";

/** The JWKS path (RFC 8615 well-known URI). */
export const JWKS_PATH = "/.well-known/jwks.json";
/** RFC 8414 §3: the authorization server metadata's well-known path, before the issuer's path. */
export const AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server";
/** RFC 9728 §3: the protected resource metadata's well-known path. */
export const PROTECTED_RESOURCE_PATH = "/.well-known/oauth-protected-resource";

/** A document and the canonical path it is served at, or why none is served. */
export type Publication =
  | { readonly path: string; readonly document: Readonly<Record<string, unknown>> }
  | { readonly unserved: string };

/** The two documents: RFC 8414 authorization server and RFC 9728 protected resource metadata. */
export interface Metadata {
  readonly authorizationServer: Publication;
  readonly protectedResource: Publication;
  /** The protected resource metadata's absolute URL, while it is served (RFC 9728 §5.1). */
  readonly resourceMetadataUrl: string | undefined;
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
  /** The issuers whose tokens the resource accepts (RFC 9728 §2 `authorization_servers`). */
  readonly authorizationServers: readonly string[];
}

/**
 * One member: its name, and its value for a config (undefined or [] leaves it out, unless the
 * member is required).
 */
type Member = readonly [name: string, value: (source: Source) => unknown, required?: "required"];

// RFC 8414 §2. URLs are the issuer's origin and gatehouse's own paths, whatever path the issuer
// has: gatehouse serves them at the root. The revocation endpoint (RFC 7009) authenticates its
// clients as the token endpoint does.
const AUTHORIZATION_SERVER: readonly Member[] = [
  ["issuer", ({ settings }) => settings.issuer],
  ["token_endpoint", ({ settings, origin }) => origin + settings.path],
  ["jwks_uri", ({ origin }) => origin + JWKS_PATH],
  // RFC 8414 §2 makes this member REQUIRED and §3.2 omits empty lists; clients (the MCP SDK
  // among them) refuse a document without it, and gatehouse has no authorization endpoint, so
  // no response type: the list is there, empty.
  ["response_types_supported", () => [], "required"],
  ["grant_types_supported", () => ["client_credentials"]],
  ["token_endpoint_auth_methods_supported", ({ auth }) => auth.methods],
  ["token_endpoint_auth_signing_alg_values_supported", ({ auth }) => auth.assertionAlgorithms],
  ["scopes_supported", ({ settings }) => settings.scopes],
  ["revocation_endpoint", ({ settings, origin }) => origin + settings.revocationPath],
  ["revocation_endpoint_auth_methods_supported", ({ auth }) => auth.methods],
  ["revocation_endpoint_auth_signing_alg_values_supported", ({ auth }) => auth.assertionAlgorithms],
  // RFC 9449 §5.1: the algorithms a DPoP proof may be signed with, at the token endpoint.
  ["dpop_signing_alg_values_supported", ({ settings }) => settings.dpop.algorithms],
];

// RFC 9728 §2: tokens are accepted in the Authorization header only (RFC 6750 §2.1).
const PROTECTED_RESOURCE: readonly Member[] = [
  ["resource", ({ settings }) => settings.audience],
  ["authorization_servers", ({ authorizationServers }) => authorizationServers],
  ["scopes_supported", ({ settings }) => settings.scopes],
  ["bearer_methods_supported", () => ["header"]],
];

// RFC 8414 §3.2: members with no value are omitted, and so are empty lists.
function document(members: readonly Member[], source: Source) {
  const body: Record<string, unknown> = {};
  for (const [name, value, required] of members) {
    const member = value(source);
    const empty = member === undefined || (Array.isArray(member) && member.length === 0);
    if (empty && required === undefined) continue;
    body[name] = member;
  }
  return Object.freeze(body);
}

const NOT_HTTPS = "an https URL (http on a loopback host) without a query or fragment";

// Resource-server-only mode: the trusted issuers publish their own keys and metadata.
export const NOT_AN_ISSUER =
  "this gatehouse issues no tokens: the trusted issuers publish their own keys and metadata";

function authorizationServer(source: Source, issuer: URL | undefined): Publication {
  if (!source.settings.ownTokens) return { unserved: NOT_AN_ISSUER };
  if (issuer === undefined) {
    return {
      unserved: `authorization server metadata is served only when tokens.issuer is ${NOT_HTTPS}`,
    };
  }
  // RFC 8414 §3.1: a terminating "/" is removed from the issuer's path before it is appended.
  const path = AUTHORIZATION_SERVER_PATH + issuer.pathname.replace(/\/$/, "");
  return { path, document: document(AUTHORIZATION_SERVER, source) };
}

function protectedResource(source: Source): Publication & { readonly url?: string } {
  const resource = secureUrl(source.settings.audience);
  if (resource === undefined) {
    return {
      unserved: `protected resource metadata is served only when tokens.audience is ${NOT_HTTPS}`,
    };
  }
  if (source.authorizationServers.length === 0) {
    return {
      unserved: `protected resource metadata is served only when tokens.issuer, its authorization server, is ${NOT_HTTPS}`,
    };
  }
  // RFC 9728 §3.1: the well-known path goes between the host and the resource's path (a "/"
  // right after the host is dropped), so each resource on a host has a document of its own.
  const pathname = resource.pathname === "/" ? "" : resource.pathname;
  const target = canonicalTarget(PROTECTED_RESOURCE_PATH + pathname);
  if (typeof target === "string") {
    return {
      unserved: `tokens.audience's path cannot hold its metadata: ${PATH_REJECTION_MESSAGES[target]}`,
    };
  }
  return {
    path: target.path,
    url: resource.origin + PROTECTED_RESOURCE_PATH + pathname,
    document: document(PROTECTED_RESOURCE, source),
  };
}

/**
 * `tokens.issuer` as the URL the RFC 8414 document is published for, whose origin its endpoints
 * are on; undefined when none is published: in resource-server-only mode gatehouse is no
 * authorization server, whatever tokens.issuer is, and an issuer that is no https URL (nor http
 * on a loopback host) is none a client can discover.
 */
export function publishedIssuer(settings: TokenSettings): URL | undefined {
  return settings.ownTokens ? secureUrl(settings.issuer) : undefined;
}

/** The metadata documents for `settings`, or why each is not served. */
export function metadataOf(settings: TokenSettings): Metadata {
  const issuer = publishedIssuer(settings);
  const source: Source = {
    settings,
    origin: issuer?.origin ?? "",
    auth: clientAuthentication(settings.clients),
    // Clients such as the MCP SDK take the first: the providers, in the file's order, then
    // gatehouse itself when it issues tokens (and its issuer is a URL a client can discover).
    authorizationServers: [
      ...settings.trustedIssuers.map((trusted) => trusted.issuer),
      ...(issuer === undefined ? [] : [settings.issuer]),
    ],
  };
  const { url, ...protectedResourceDocument } = protectedResource(source);
  return {
    authorizationServer: authorizationServer(source, issuer),
    protectedResource: protectedResourceDocument,
    resourceMetadataUrl: url,
  };
}

/** Builds a bearer route's `WWW-Authenticate` value with the given auth-params. */
export type BearerChallenge = (params?: string) => string;

/**
 * The `WWW-Authenticate` challenge of a bearer route (RFC 6750 §3) with `params` (an error, a
 * scope), and with `resource_metadata` whenever the protected resource's document is served
 * (RFC 9728 §5.1), so a client refused 401 or 403 can find where tokens come from.
 */
export function bearerChallenge(metadata: Metadata): BearerChallenge {
  const url = metadata.resourceMetadataUrl;
  const tail = url === undefined ? "" : `, resource_metadata="${url}"`;
  return (params) =>
    params === undefined
      ? `Bearer realm="gatehouse"${tail}`
      : `Bearer realm="gatehouse", ${params}${tail}`;
}
