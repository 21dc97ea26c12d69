/**
 * What a token grants: its scopes (RFC 6749 §3.3) and its audience (RFC 8707 resource
 * indicators), decided from what the client asked for and what its config entry allows. Every
 * refusal is a GatehouseError with a fixed description that never echoes the request.
 */
import type { ClientConfig } from "../config/schema.js";
import { isResourceUri, SCOPE_TOKEN } from "../config/schema-checks.js";
import { GatehouseError } from "../http/errors.js";

/** What one client may be granted. */
export interface ClientGrants {
  readonly scopes: ReadonlySet<string>;
  /** Granted when the request names no scope: `default_scopes`, space-separated ("" for none). */
  readonly defaultScope: string;
  /** The `resource` values it may request (RFC 8707 §2). */
  readonly resources: ReadonlySet<string>;
}

/** The scopes and resources a token request names; an empty `scope` is absent. */
export interface GrantRequest {
  readonly scope: string | undefined;
  readonly resources: readonly string[];
}

/** What a token carries: the `scope` claim (undefined when nothing is granted) and its `aud`. */
export interface Grant {
  readonly scope: string | undefined;
  readonly audience: string | readonly string[];
}

const MALFORMED_SCOPE = new GatehouseError(
  400,
  "invalid_scope",
  "scope must be scope tokens separated by single spaces",
);
const SCOPE_NOT_ALLOWED = new GatehouseError(
  400,
  "invalid_scope",
  "a requested scope is not one this client may be granted",
);
const MALFORMED_RESOURCE = new GatehouseError(
  400,
  "invalid_target",
  "resource must be an absolute URI without a fragment",
);
const RESOURCE_NOT_ALLOWED = new GatehouseError(
  400,
  "invalid_target",
  "a requested resource is not one this client may obtain a token for",
);

/** Compiles each client's `scopes`, `default_scopes` and `resources` by client id. */
export function compileGrants(
  clients: readonly ClientConfig[],
  audience: string,
): ReadonlyMap<string, ClientGrants> {
  return new Map(
    clients.map((client) => [
      client.id,
      {
        scopes: new Set(client.scopes),
        defaultScope: (client.default_scopes ?? client.scopes).join(" "),
        resources: new Set(client.resources ?? [audience]),
      },
    ]),
  );
}

// RFC 6749 §3.3: scope = scope-token *( SP scope-token ); a scope named twice is granted once.
function requestedScope(scope: string, allowed: ReadonlySet<string>): string {
  const names = new Set(scope.split(" "));
  for (const name of names) {
    if (!SCOPE_TOKEN.test(name)) throw MALFORMED_SCOPE;
    if (!allowed.has(name)) throw SCOPE_NOT_ALLOWED;
  }
  return [...names].join(" ");
}

// RFC 8707 §2: each resource is an absolute URI without a fragment, and one the client may ask for.
function requestedAudience(resources: readonly string[], allowed: ReadonlySet<string>): string[] {
  for (const resource of resources) {
    if (!isResourceUri(resource)) throw MALFORMED_RESOURCE;
    if (!allowed.has(resource)) throw RESOURCE_NOT_ALLOWED;
  }
  return [...new Set(resources)];
}

/**
 * The grant for a client's token request: the requested scopes, or its default ones, and the
 * requested resources as `aud` (a string for one, RFC 7519 §4.1.3), or `audience`. Throws
 * `invalid_scope` or `invalid_target` (RFC 6749 §5.2, RFC 8707 §2).
 */
export function grantFor(client: ClientGrants, audience: string, request: GrantRequest): Grant {
  const scope =
    request.scope === undefined
      ? client.defaultScope
      : requestedScope(request.scope, client.scopes);
  const resources = requestedAudience(request.resources, client.resources);
  return {
    scope: scope === "" ? undefined : scope,
    audience:
      resources.length === 0
        ? audience
        : resources.length === 1
          ? (resources[0] as string)
          : resources,
  };
}
