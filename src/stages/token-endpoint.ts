import type { IncomingMessage } from "node:http";
import type { TokenSettings } from "../tokens/settings.js";
import type { Clock } from "../clock.js";
import type { ErrorCode } from "../http/error-codes.js";
import { GatehouseError } from "../http/errors.js";
import type { FailureDecision, FailureLimiter } from "../limits/failures.js";
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
  bodyType,
  parseBasicCredentials,
  parseTokenBody,
  queryHasCredentials,
  type ClientCredentials,
  type TokenRequestFields,
} from "../tokens/request.js";
import { createClientAuthenticator, type ClientAuthenticator } from "../tokens/client-auth.js";
import { fieldLines } from "../http/field-lines.js";

/** Largest token request body read; a larger one gets 413 before it is read. */
export const MAX_TOKEN_BODY_BYTES = 8 * 1024;

// RFC 6749 §5.1: token responses and their errors must not be cached.
const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" } as const;
const BASIC_CHALLENGE = 'Basic realm="gatehouse"';

function oauthError(
  status: number,
  code: ErrorCode,
  description: string,
  headers: Readonly<Record<string, string>> = {},
): Reply {
  return {
    status,
    headers: { ...NO_STORE, ...headers },
    body: { error: code, error_description: description },
  };
}

// One answer for an unknown id, a wrong secret, malformed Basic or none at all, so an
// unknown id cannot be told from a wrong secret.
// RFC 9110 §15.5.2: a 401 always carries a challenge, so it is sent whichever method was used.
const INVALID_CLIENT = oauthError(401, "invalid_client", "client authentication failed", {
  "www-authenticate": BASIC_CHALLENGE,
});
const WRONG_METHOD = oauthError(405, "method_not_allowed", "the token endpoint accepts POST only", {
  allow: "POST",
});
const TOO_LARGE = oauthError(
  413,
  "payload_too_large",
  `the token request body must be at most ${MAX_TOKEN_BODY_BYTES} bytes`,
  { connection: "close" },
);
const CREDENTIALS_IN_QUERY = oauthError(
  400,
  "invalid_request",
  "client credentials must not be sent in the request URI",
);
const TWO_AUTHORIZATIONS = oauthError(
  400,
  "invalid_request",
  "the request has more than one Authorization header",
);
const TWO_METHODS = oauthError(
  400,
  "invalid_request",
  "the client must use one authentication method, Basic or the body, not both",
);
const UNSUPPORTED_GRANT = oauthError(
  400,
  "unsupported_grant_type",
  "the only grant type served here is client_credentials",
);

// RFC 6749 §4.1.2.1 defines `temporarily_unavailable` for the authorization endpoint; the token
// endpoint answers it in the same sense, in §5.2's format. RFC 9110 §10.2.3: retry after a second.
const TEMPORARILY_UNAVAILABLE = oauthError(
  503,
  "temporarily_unavailable",
  "too many client authentications are being checked; retry after 1 second",
  { "retry-after": "1" },
);

function rateLimited(decision: FailureDecision): Reply {
  return oauthError(
    429,
    "rate_limited",
    `too many failed client authentications; retry after ${decision.retryAfterSeconds} seconds`,
    { "retry-after": String(decision.retryAfterSeconds) },
  );
}

/** A token request's credentials and its fields. */
interface Received {
  readonly credentials: ClientCredentials;
  readonly fields: TokenRequestFields;
}

/** What the Authorization header holds for the token endpoint. */
type HeaderCredentials = ClientCredentials | undefined | "malformed" | "repeated";

/** Basic credentials from the Authorization header, undefined without one, or why not. */
function headerCredentials(req: IncomingMessage): HeaderCredentials {
  const lines = fieldLines(req.rawHeaders, "authorization");
  if (lines === 0) return undefined;
  if (lines > 1) return "repeated";
  const value = req.headers.authorization ?? "";
  const space = value.indexOf(" ");
  // RFC 9110 §11.1: the scheme is case-insensitive. Any other scheme is an unsupported method.
  if (space === -1 || value.slice(0, space).toLowerCase() !== "basic") return "malformed";
  return parseBasicCredentials(value.slice(space + 1).trim()) ?? "malformed";
}

/** The credentials to check, or the answer when the request cannot be authenticated. */
function chooseCredentials(
  basic: ClientCredentials | undefined,
  fields: TokenRequestFields,
): ClientCredentials | Reply {
  if (basic !== undefined) {
    // RFC 6749 §2.3: a client MUST NOT use more than one authentication method.
    if (fields.clientSecret !== undefined) return TWO_METHODS;
    if (fields.clientId !== undefined && fields.clientId !== basic.id) return TWO_METHODS;
    return basic;
  }
  if (fields.clientId === undefined || fields.clientSecret === undefined) return INVALID_CLIENT;
  return { id: fields.clientId, secret: fields.clientSecret };
}

type Body = Buffer | "too_large" | "timeout" | "aborted";

/** Reads the body up to `limit` bytes, giving up after `timeoutMs` (one timer per read). */
function readBody(
  req: IncomingMessage,
  limit: number,
  timeoutMs: number,
  clock: Clock,
): Promise<Body> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: Body): void => {
      timer.cancel();
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onAbort);
      req.off("close", onAbort);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) finish("too_large");
      else chunks.push(chunk);
    };
    const onEnd = (): void => finish(Buffer.concat(chunks, size));
    const onAbort = (): void => finish("aborted");
    const timer = clock.after(timeoutMs, () => finish("timeout"));
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onAbort);
    // A close before the end means the client went away mid-body.
    req.on("close", onAbort);
  });
}

function declaredTooLarge(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return length !== undefined && Number(length) > MAX_TOKEN_BODY_BYTES;
}

const LIMITS_UNAVAILABLE = new GatehouseError(
  503,
  "limits_unavailable",
  "the failure limiter cannot be reached; try again shortly",
  { "retry-after": "1" },
);

/** What answering a token request needs, built once with the stage. */
interface Endpoint {
  readonly settings: TokenSettings;
  readonly failures: FailureLimiter;
  readonly clients: ClientAuthenticator;
  readonly services: Services;
  /** Milliseconds the body may take to arrive once it is wanted. */
  readonly bodyMs: number;
  /** The answer when the body is not received within `bodyMs`. */
  readonly bodyTimeout: Reply;
}

// The limiter store is the only part that may fail for reasons outside the request (Redis); the
// failure limiter throws only under \`on_outage: closed\` (under \`local\` and \`open\` it answers).
async function limiterCall<T>(endpoint: Endpoint, call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    endpoint.services.log.error({ err: error }, "failure limiter unavailable");
    throw LIMITS_UNAVAILABLE;
  }
}

// Counts a failed client authentication, then answers it.
function fail(endpoint: Endpoint, reason: string, reply: Reply): Reply {
  endpoint.services.metrics.authFailures.inc({ reason });
  return reply;
}

/**
 * Reads the token request's body: the credentials to check (from the body, or the Basic ones),
 * or the answer when there are none to check, or HANDLED when the client went away.
 */
async function receiveCredentials(
  endpoint: Endpoint,
  ctx: RequestContext,
  basic: ClientCredentials | undefined,
): Promise<Received | Reply | typeof HANDLED> {
  const { req } = ctx;
  // Only now is the body wanted (RFC 9110 §10.1.1): a refused request never got 100 Continue.
  if (req.headers.expect !== undefined) ctx.res.writeContinue();
  const body = await readBody(req, MAX_TOKEN_BODY_BYTES, endpoint.bodyMs, endpoint.services.clock);
  if (body === "aborted") {
    ctx.res.destroy();
    return HANDLED;
  }
  if (body === "too_large") return TOO_LARGE;
  if (body === "timeout") return endpoint.bodyTimeout;
  const fields = parseTokenBody(body, bodyType(req.headers["content-type"]));
  // RFC 6749 §4.4.2; absent is taken as client_credentials, as the service's existing clients may
  // not send it; no case folding.
  if (fields.grantType !== undefined && fields.grantType !== "client_credentials") {
    return UNSUPPORTED_GRANT;
  }
  const credentials = chooseCredentials(basic, fields);
  return "secret" in credentials ? { credentials, fields } : credentials;
}

/** Authenticates the client of a token request and issues its token. */
async function serveToken(
  endpoint: Endpoint,
  ctx: RequestContext,
  basic: Exclude<HeaderCredentials, "repeated">,
): Promise<Outcome> {
  const { settings, failures, services } = endpoint;
  const ip = ctx.client.address;
  // Beyond the limit every attempt from the address is refused, a malformed one too
  // (RFC 6749 §2.3.1); attempts are counted per address only, so naming a client locks no one out.
  const early = await limiterCall(endpoint, failures.peek(ip));
  if (!early.allowed) return fail(endpoint, "rate_limited", rateLimited(early));
  if (basic === "malformed") return fail(endpoint, "malformed_credentials", INVALID_CLIENT);
  const received = await receiveCredentials(endpoint, ctx, basic);
  if (received === HANDLED || !("credentials" in received)) {
    return received === INVALID_CLIENT ? fail(endpoint, "no_credentials", received) : received;
  }
  const { credentials, fields } = received;
  const decision = await limiterCall(endpoint, failures.attempt(ip));
  if (!decision.allowed) {
    services.log.warn({ requestId: ctx.requestId, ip }, "client authentication failure limit");
    return fail(endpoint, "rate_limited", rateLimited(decision));
  }
  const checked = await endpoint.clients.check(credentials.id, credentials.secret);
  if (checked === "busy") {
    // The secret was never checked, so this was no guess: the attempt is taken back.
    await limiterCall(endpoint, failures.succeeded(decision));
    return TEMPORARILY_UNAVAILABLE;
  }
  if (checked === "refused") {
    const listed = settings.clients.secrets.has(credentials.id);
    // Per client id, so an operator sees a guessing campaign that no address's count shows;
    // ids the config does not list share one label, so a guesser cannot grow the label set.
    services.metrics.tokenFailures.inc({ client: listed ? credentials.id : "unknown" });
    return fail(endpoint, listed ? "wrong_secret" : "unknown_client", INVALID_CLIENT);
  }
  await limiterCall(endpoint, failures.succeeded(decision));
  ctx.clientId = credentials.id;
  const grants = settings.grants.get(credentials.id) as ClientGrants;
  const grant = grantFor(grants, settings.audience, fields);
  const issued = await issueToken(settings, credentials.id, services.now(), grant);
  services.metrics.tokensIssued.inc();
  return {
    status: 200,
    headers: NO_STORE,
    body: {
      access_token: issued.token,
      token: issued.token,
      token_type: "Bearer",
      expires_in: issued.expiresIn,
      // RFC 6749 §5.1: what was granted, whether it was requested or the client's default.
      ...(grant.scope === undefined ? {} : { scope: grant.scope }),
    },
  };
}

// A refusal raised while serving a token request, in the OAuth error format.
function asOauthError(error: unknown): Reply {
  if (!(error instanceof GatehouseError)) throw error;
  return oauthError(error.status, error.code, error.message, error.headers);
}

/**
 * Serves `POST {tokens.path}` (OAuth 2.0 client credentials, RFC 6749 §4.4): gatehouse's own path,
 * never forwarded.
 */
export function createTokenEndpointStage(
  settings: TokenSettings,
  failures: FailureLimiter,
  services: Services,
  bodyMs: number,
): Stage {
  const endpoint: Endpoint = {
    settings,
    failures,
    clients: createClientAuthenticator(
      settings.clients,
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
  return function tokenEndpoint(ctx) {
    if (ctx.path !== settings.path) return undefined;
    ctx.own = "token";
    const { req } = ctx;
    // Answers that need no body come first, so they are sent without inviting it.
    if (req.method !== "POST") return WRONG_METHOD;
    if (declaredTooLarge(req)) return TOO_LARGE;
    if (queryHasCredentials(ctx.query)) return CREDENTIALS_IN_QUERY;
    const basic = headerCredentials(req);
    if (basic === "repeated") return TWO_AUTHORIZATIONS;
    return serveToken(endpoint, ctx, basic).catch(asOauthError);
  };
}
