import type { IncomingMessage } from "node:http";
import type { TokenSettings } from "../tokens/settings.js";
import { GatehouseError } from "../http/errors.js";
import type { FailureLimiter } from "../limits/failures.js";
import {
  HANDLED,
  type Outcome,
  type Reply,
  type RequestContext,
  type Stage,
} from "../core/context.js";
import type { Services } from "../core/services.js";
import { issueToken } from "../tokens/issue.js";
import { grantFor, type ClientGrants } from "../tokens/grants.js";
import {
  headerCredentials,
  queryHasCredentials,
  type HeaderCredentials,
} from "../tokens/request.js";
import { createClientAuthenticator } from "../tokens/client-auth.js";
import { MAX_REVOCATIONS_PER_CLIENT, type TokenMarks } from "../tokens/marks.js";
import { createTokenVerifier } from "../tokens/verify.js";
import type { RememberedSecrets } from "../tokens/remembered.js";
import { createTokenDpop, type TokenDpop } from "../tokens/dpop-grant.js";
import {
  authenticateClient,
  LIMITS_UNAVAILABLE,
  MAX_TOKEN_BODY_BYTES,
  NO_STORE,
  oauthError,
  retryShortly,
  TOO_LARGE,
  TWO_AUTHORIZATIONS,
  type Authenticated,
  type Endpoint,
  type FieldCheck,
} from "../tokens/authenticate-client.js";

const WRONG_METHOD = oauthError(405, "method_not_allowed", "the token endpoint accepts POST only", {
  allow: "POST",
});

const CREDENTIALS_IN_QUERY = oauthError(
  400,
  "invalid_request",
  "client credentials must not be sent in the request URI",
);

const REVOCATION_WRONG_METHOD = oauthError(
  405,
  "method_not_allowed",
  "the revocation endpoint accepts POST only",
  { allow: "POST" },
);

const NO_TOKEN = oauthError(400, "invalid_request", "the revocation request needs token");

// RFC 7009 §2.2: 200 whether or not the token was valid, so the answer tells nothing about it.
const REVOKED: Reply = { status: 200, headers: NO_STORE, body: {} };

const UNSUPPORTED_GRANT = oauthError(
  400,
  "unsupported_grant_type",
  "the only grant type served here is client_credentials",
);

const REVOCATION_UNAVAILABLE = retryShortly("the revocation cannot be recorded now");
// RFC 7009 §2.2.1: 503, the token stays valid; a revocation succeeds again once some of the
// client's revoked tokens have expired.
const REVOCATIONS_FULL = oauthError(
  503,
  "temporarily_unavailable",
  `the client holds ${MAX_REVOCATIONS_PER_CLIENT} revoked tokens that have not expired; revoke again once some have`,
);

// Resource-server-only mode: every client gets its tokens from a trusted issuer.
const NO_OWN_TOKENS = oauthError(
  404,
  "not_found",
  "this gatehouse issues and revokes no tokens: clients get theirs from the trusted issuers",
);

function declaredTooLarge(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return length !== undefined && Number(length) > MAX_TOKEN_BODY_BYTES;
}

// RFC 6749 §4.4.2; absent is taken as client_credentials, as the service's existing clients may
// not send it; no case folding.
const tokenFields: FieldCheck = (fields) =>
  fields.grantType !== undefined && fields.grantType !== "client_credentials"
    ? UNSUPPORTED_GRANT
    : undefined;

// RFC 7009 §2.1: `token` is required; `token_type_hint` is only a hint and is not read.
const revocationFields: FieldCheck = (fields) =>
  fields.token === undefined ? NO_TOKEN : undefined;

/** Serves one of the endpoints once its client is authenticated. */
type Serve = (
  endpoint: Endpoint,
  ctx: RequestContext,
  basic: Exclude<HeaderCredentials, "repeated">,
) => Promise<Outcome>;

/** An endpoint that checks `check`, authenticates the client, then answers with `serve`. */
function authenticated(
  check: FieldCheck,
  serve: (endpoint: Endpoint, ctx: RequestContext, client: Authenticated) => Promise<Outcome>,
): Serve {
  return async (endpoint, ctx, basic) => {
    const client = await authenticateClient(endpoint, ctx, basic, check);
    return client === HANDLED || !("clientId" in client) ? client : serve(endpoint, ctx, client);
  };
}

/**
 * Issues a token to the authenticated client, with what it asked for and may be granted, bound to
 * the key of its DPoP proof when it sent one (RFC 9449 §5). A `DPoP` header too long to be a
 * proof is refused first, before any credential or signature is checked.
 */
function tokenServer(dpop: TokenDpop): Serve {
  const serve = authenticated(tokenFields, async (endpoint, ctx, client) => {
    const { settings, services } = endpoint;
    const grants = settings.grants.get(client.clientId) as ClientGrants;
    const grant = grantFor(grants, settings.audience, client.fields);
    // After the grant: a proof is held only for a request that gets its token.
    const nowMs = services.now();
    const binding = await dpop.bind(ctx, client.clientId, nowMs);
    if ("status" in binding) return binding;
    const issued = await issueToken(settings, client.clientId, nowMs, grant, binding.jkt);
    services.metrics.tokensIssued.inc();
    return {
      status: 200,
      headers: { ...NO_STORE, ...binding.headers },
      body: {
        access_token: issued.token,
        token: issued.token,
        // RFC 9449 §5.1: a bound token is of type DPoP.
        token_type: binding.jkt === undefined ? "Bearer" : "DPoP",
        expires_in: issued.expiresIn,
        // RFC 6749 §5.1: what was granted, whether it was requested or the client's default.
        ...(grant.scope === undefined ? {} : { scope: grant.scope }),
      },
    };
  });
  return (endpoint, ctx, basic) => dpop.tooLarge(ctx) ?? serve(endpoint, ctx, basic);
}

/**
 * Revokes an access token of the authenticated client (RFC 7009 §2.1): its `jti` is denied until
 * the token would have expired. A token that does not verify, or of another client, is left alone
 * and answered alike (§2.2).
 */
const serveRevocation = authenticated(revocationFields, async (endpoint, ctx, client) => {
  const nowMs = endpoint.services.now();
  const token = client.fields.token as string;
  const verified =
    endpoint.verifier.cached(token, nowMs) ??
    (await endpoint.verifier.verify(token, nowMs).catch(() => undefined));
  if (verified === undefined || verified.clientId !== client.clientId) return REVOKED;
  const revoked = await endpoint.marks.revoke(
    verified.clientId,
    verified.jti,
    verified.untilMs,
    nowMs,
  );
  if (revoked === "unavailable") return REVOCATION_UNAVAILABLE;
  if (revoked === "full") return REVOCATIONS_FULL;
  endpoint.services.log.info(
    { requestId: ctx.requestId, clientId: verified.clientId, jti: verified.jti },
    "access token revoked",
  );
  return REVOKED;
});

// A refusal raised while serving a token request, in the OAuth error format.
function asOauthError(error: unknown): Reply {
  if (!(error instanceof GatehouseError)) throw error;
  return oauthError(error.status, error.code, error.message, error.headers);
}

/**
 * Serves `POST {tokens.path}` (OAuth 2.0 client credentials, RFC 6749 §4.4; with DPoP, RFC 9449
 * §5) and `POST {tokens.revocation_path}` (RFC 7009): gatehouse's own paths, never forwarded and
 * never counted against the limits. The secrets that match are remembered in `remembered`.
 */
export function createTokenEndpointStage(
  settings: TokenSettings,
  remembered: RememberedSecrets,
  failures: FailureLimiter,
  marks: TokenMarks,
  services: Services,
  bodyMs: number,
): Stage {
  if (!settings.ownTokens) {
    return function tokenEndpoint(ctx) {
      const revocation = ctx.path === settings.revocationPath;
      if (ctx.path !== settings.path && !revocation) return undefined;
      ctx.own = revocation ? "revocation" : "token";
      return NO_OWN_TOKENS;
    };
  }
  const endpoint: Endpoint = {
    settings,
    failures,
    marks,
    verifier: createTokenVerifier(settings),
    clients: createClientAuthenticator(
      settings.clients,
      remembered,
      settings,
      settings.verifyConcurrency,
      services.clock,
      services.metrics,
    ),
    services,
    bodyMs,
    // RFC 9110 §15.5.9: 408 closes the connection; the rest of a trickled body is never read.
    bodyTimeout: oauthError(
      408,
      "request_timeout",
      `the token request body was not received within ${bodyMs / 1000} seconds`,
      { connection: "close" },
    ),
  };
  // One proof verifier per snapshot, with its own cache of proof keys.
  const serveToken = tokenServer(createTokenDpop(settings, marks, failures, services));
  return function tokenEndpoint(ctx) {
    const revocation = ctx.path === settings.revocationPath;
    if (ctx.path !== settings.path && !revocation) return undefined;
    ctx.own = revocation ? "revocation" : "token";
    const { req } = ctx;
    // Answers that need no body come first, so they are sent without inviting it.
    if (req.method !== "POST") return revocation ? REVOCATION_WRONG_METHOD : WRONG_METHOD;
    if (declaredTooLarge(req)) return TOO_LARGE;
    if (queryHasCredentials(ctx.query)) return CREDENTIALS_IN_QUERY;
    const basic = headerCredentials(req);
    if (basic === "repeated") return TWO_AUTHORIZATIONS;
    if (!revocation) return serveToken(endpoint, ctx, basic).catch(asOauthError);
    // RFC 7009 §2.2.1 with RFC 6749 §5.2: a revocation that cannot be recorded, or whose client
    // cannot be checked against the failure limit, is temporarily_unavailable.
    return serveRevocation(endpoint, ctx, basic).catch((error: unknown) =>
      error === LIMITS_UNAVAILABLE ? REVOCATION_UNAVAILABLE : asOauthError(error),
    );
  };
}
