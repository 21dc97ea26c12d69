/**
 * The metadata documents a client discovers gatehouse by: RFC 8414 authorization server metadata
 * and RFC 9728 protected resource metadata, built once per config from one list of members each.
 */
import { canonicalTarget, PATH_REJECTION_MESSAGES } from "../http/path.js";
import { clientAuthentication, type TokenSettings } from "./settings.js";
import { secureUrl } from "../http/secure-url.js";
import type { Route } from "../routes/table.js";

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
  /** Every bearer route requires DPoP, and there is one. */
  readonly dpopOnly: boolean;
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
  // RFC 9449 §5.1: the proofs' algorithms, and whether every protected route requires DPoP.
  ["dpop_signing_alg_values_supported", ({ settings }) => settings.dpop.algorithms],
  ["dpop_bound_access_tokens_required", ({ dpopOnly }) => (dpopOnly ? true : undefined)],
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

/** The metadata documents for `settings` and `routes`, or why each is not served. */
export function metadataOf(settings: TokenSettings, routes: readonly Route[]): Metadata {
  const bearerRoutes = routes.filter((route) => route.auth === "bearer");
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
    dpopOnly: bearerRoutes.length > 0 && bearerRoutes.every((route) => route.dpopRequired),
  };
  const { url, ...protectedResourceDocument } = protectedResource(source);
  return {
    authorizationServer: authorizationServer(source, issuer),
    protectedResource: protectedResourceDocument,
    resourceMetadataUrl: url,
  };
}

/**
 * Which challenge of a 401 or 403 carries its error: the Bearer one for a request that sent a
 * Bearer token (or none), the DPoP one for a request that used the DPoP scheme, and the DPoP one
 * alone on a route that takes no plain token (RFC 9449 §7.1).
 */
export type ChallengeVariant = "bearer" | "dpop" | "dpop_only";

/** Every variant, for answers built once per config. */
export const CHALLENGE_VARIANTS = ["bearer", "dpop", "dpop_only"] as const;

/** The variant of a refusal on a route (`dpopRequired`) to a request that used DPoP or not. */
export function variantOf(dpopRequired: boolean, usedDpop: boolean): ChallengeVariant {
  return dpopRequired ? "dpop_only" : usedDpop ? "dpop" : "bearer";
}

/** Builds a `WWW-Authenticate` value: `params` (an error, a scope) in the variant's challenge. */
export type Challenges = (variant: ChallengeVariant, params?: string) => string;

/**
 * The challenges of a bearer route (RFC 6750 §3, RFC 9449 §7.1), one field value: the Bearer
 * challenge where plain tokens are accepted, then the DPoP one with the proof algorithms
 * (`algs`); `params` go in the variant's challenge. `resource_metadata` is in the first whenever
 * the protected resource's document is served (RFC 9728 §5.1), so a client refused 401 or 403
 * can find where tokens come from.
 */
export function challengesOf(metadata: Metadata, dpopAlgorithms: readonly string[]): Challenges {
  const url = metadata.resourceMetadataUrl;
  const tail = url === undefined ? "" : `, resource_metadata="${url}"`;
  const algs = `algs="${dpopAlgorithms.join(" ")}"`;
  const bearer = (params?: string): string =>
    params === undefined
      ? `Bearer realm="gatehouse"${tail}`
      : `Bearer realm="gatehouse", ${params}${tail}`;
  const dpop = (params?: string): string =>
    params === undefined ? `DPoP ${algs}` : `DPoP ${params}, ${algs}`;
  return (variant, params) => {
    if (variant === "bearer") return `${bearer(params)}, ${dpop()}`;
    if (variant === "dpop") return `${bearer()}, ${dpop(params)}`;
    return `${dpop(params)}${tail}`;
  };
}
