import { errorReply, type Reply, type Stage } from "../core/context.js";
import {
  AUTHORIZATION_SERVER_PATH,
  JWKS_PATH,
  metadataOf,
  PROTECTED_RESOURCE_PATH,
} from "../tokens/metadata.js";
import type { TokenSettings } from "../tokens/settings.js";

const WRONG_METHOD = errorReply(405, "method_not_allowed", "this document answers GET and HEAD", {
  allow: "GET, HEAD",
});
const NOT_SERVED = errorReply(
  404,
  "not_found",
  "metadata is served only for an https issuer (http on a loopback host)",
);
const NOT_SERVED_RS = errorReply(
  404,
  "not_found",
  "the protected resource metadata is served only for an https tokens.audience (http on a loopback host)",
);
// Resource-server-only mode: the trusted issuers publish their own keys and metadata.
const NOT_AN_ISSUER = errorReply(
  404,
  "not_found",
  "this gatehouse issues no tokens: the trusted issuers publish their own keys and metadata",
);

function served(body: unknown): Reply {
  return {
    status: 200,
    headers: { "content-type": "application/json", "cache-control": "public, max-age=300" },
    body,
  };
}

// The JWKS and the metadata namespaces are gatehouse's, whatever the issuer: never forwarded.
function ownPath(path: string): boolean {
  return (
    path === JWKS_PATH ||
    path === PROTECTED_RESOURCE_PATH ||
    path === AUTHORIZATION_SERVER_PATH ||
    path.startsWith(AUTHORIZATION_SERVER_PATH + "/")
  );
}

/**
 * Serves the public documents: the JWKS (RFC 7517 §5), the authorization server metadata
 * (RFC 8414) and the protected resource metadata (RFC 9728); gatehouse's own paths, without
 * authentication, never counted or forwarded.
 */
export function createMetadataStage(settings: TokenSettings): Stage {
  const metadata = metadataOf(settings);
  const documents = new Map<string, Reply>();
  if (settings.ownTokens) documents.set(JWKS_PATH, served(settings.keys.jwks));
  if (metadata?.authorizationServerPath !== undefined) {
    documents.set(metadata.authorizationServerPath, served(metadata.authorizationServer));
  }
  if (metadata !== undefined) {
    documents.set(PROTECTED_RESOURCE_PATH, served(metadata.protectedResource));
  }
  const missing = settings.ownTokens ? NOT_SERVED : NOT_AN_ISSUER;
  return function metadataDocuments(ctx) {
    const { path } = ctx;
    if (!ownPath(path)) return undefined;
    ctx.own = path === JWKS_PATH ? "jwks" : "metadata";
    const document = documents.get(path);
    if (document === undefined) {
      return path === PROTECTED_RESOURCE_PATH && !settings.ownTokens ? NOT_SERVED_RS : missing;
    }
    const method = ctx.req.method;
    return method === "GET" || method === "HEAD" ? document : WRONG_METHOD;
  };
}
