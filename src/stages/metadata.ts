import { errorReply, type Reply, type RequestContext, type Stage } from "../core/context.js";
import {
  AUTHORIZATION_SERVER_PATH,
  JWKS_PATH,
  NOT_AN_ISSUER,
  PROTECTED_RESOURCE_PATH,
  type Metadata,
  type Publication,
} from "../tokens/metadata.js";
import type { TokenSettings } from "../tokens/settings.js";

const WRONG_METHOD = errorReply(405, "method_not_allowed", "this document answers GET and HEAD", {
  allow: "GET, HEAD",
});
const NO_JWKS = errorReply(404, "not_found", NOT_AN_ISSUER);

function served(body: unknown): Reply {
  return {
    status: 200,
    headers: { "content-type": "application/json", "cache-control": "public, max-age=300" },
    body,
  };
}

// A well-known namespace (RFC 8615): the path itself and everything below it.
function within(path: string, namespace: string): boolean {
  return path === namespace || path.startsWith(namespace + "/");
}

/** The answers of one well-known namespace: its document, and a 404 saying why for the rest. */
interface Namespace {
  readonly prefix: string;
  readonly path: string | undefined;
  readonly document: Reply | undefined;
  readonly notFound: Reply;
}

function namespace(prefix: string, published: Publication, what: string): Namespace {
  if ("unserved" in published) {
    return {
      prefix,
      path: undefined,
      document: undefined,
      notFound: errorReply(404, "not_found", published.unserved),
    };
  }
  return {
    prefix,
    path: published.path,
    document: served(published.document),
    notFound: errorReply(404, "not_found", `${what} is served at ${published.path}`),
  };
}

/**
 * Serves the public documents: the JWKS (RFC 7517 §5), the authorization server metadata
 * (RFC 8414) and the protected resource metadata (RFC 9728); gatehouse's own paths, without
 * authentication, never counted or forwarded. Any other path in the two metadata namespaces
 * answers 404 saying where the document is, or why none is served. In resource-server-only mode
 * the JWKS and the authorization server metadata answer 404: the trusted issuers publish theirs.
 */
export function createMetadataStage(settings: TokenSettings, metadata: Metadata): Stage {
  // In resource-server-only mode the key ring's key signs nothing, so it is not published.
  const jwks = settings.ownTokens ? served(settings.keys.jwks) : undefined;
  const namespaces = [
    namespace(
      AUTHORIZATION_SERVER_PATH,
      metadata.authorizationServer,
      "the authorization server's metadata",
    ),
    namespace(
      PROTECTED_RESOURCE_PATH,
      metadata.protectedResource,
      "the protected resource's metadata",
    ),
  ];
  const answer = (ctx: RequestContext, document: Reply): Reply => {
    const method = ctx.req.method;
    return method === "GET" || method === "HEAD" ? document : WRONG_METHOD;
  };
  return function metadataDocuments(ctx) {
    const { path } = ctx;
    if (path === JWKS_PATH) {
      ctx.own = "jwks";
      return jwks === undefined ? NO_JWKS : answer(ctx, jwks);
    }
    for (const known of namespaces) {
      if (!within(path, known.prefix)) continue;
      ctx.own = "metadata";
      return path === known.path && known.document !== undefined
        ? answer(ctx, known.document)
        : known.notFound;
    }
    return undefined;
  };
}
