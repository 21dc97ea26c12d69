import type { FailureRule, TokenSettings } from "../tokens/settings.js";
import { fieldLines } from "../http/field-lines.js";
import type { FailureDecision, FailureLimiter } from "../limits/failures.js";
import { tooManyRequests } from "../limits/headers.js";
import { errorReply, type Reply, type RequestContext, type Stage } from "../core/context.js";
import type { Services } from "../core/services.js";
import {
  createTokenVerifier,
  TokenRejected,
  type KeySetFor,
  type VerifiedToken,
} from "../tokens/verify.js";
import { KeysUnavailable } from "../tokens/provider-tokens.js";
import { OWN_ISSUER_NAME } from "../config/issuers-schema.js";
import type { TokenMarks } from "../tokens/marks.js";
import type { BearerChallenge } from "../tokens/metadata.js";
import {
  invalidTokenAnswers,
  malformedAnswer,
  type InvalidTokenAnswers,
  missingAnswer,
  refused,
} from "../tokens/bearer-answers.js";
import { BEARER_REFUSALS, type BearerRefusal, type TokenRule } from "../tokens/refusal-reasons.js";

/** Longest bearer token read; a longer one is refused before any parsing. */
export const MAX_BEARER_TOKEN_LENGTH = 4096;

// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

const TOO_LONG_WORDS = `the bearer token must be at most ${MAX_BEARER_TOKEN_LENGTH} bytes`;
const NOT_B64TOKEN_WORDS = "the bearer token has characters a token cannot have";

/** Why a bearer token cannot even be read (rule `malformed`), or undefined when it can. */
export function unreadableToken(token: string): string | undefined {
  if (token.length > MAX_BEARER_TOKEN_LENGTH) return TOO_LONG_WORDS;
  return B64TOKEN.test(token) ? undefined : NOT_B64TOKEN_WORDS;
}

// The request's credentials cannot be read (rule `malformed`), each case in words of its own.
const TWO_AUTHORIZATIONS = malformedAnswer("the request has more than one Authorization header");
const EMPTY_BEARER = malformedAnswer("the Bearer scheme needs a token");
const NOT_B64TOKEN = malformedAnswer(NOT_B64TOKEN_WORDS);
const TOO_LONG = malformedAnswer(TOO_LONG_WORDS);
const TOKEN_IN_QUERY = malformedAnswer("send the token in the Authorization header, not the URI");

// A provider's unknown `kid` that no fetch since it was asked for has answered: the token may be
// good, so it must not be thrown away as a 401 would make the client do.
function keysUnavailable(error: KeysUnavailable): Reply {
  const seconds = error.retryAfterSeconds;
  const message =
    error.reason === "unknown_kid"
      ? `${BEARER_REFUSALS.unknown_kid} yet; the keys of ${error.issuer} are fetched again in ${seconds} s`
      : `${BEARER_REFUSALS.keys_unavailable} (${error.issuer}); retry after ${seconds} s`;
  return errorReply(503, "temporarily_unavailable", message, { "retry-after": String(seconds) });
}

const UNAVAILABLE = Symbol("unavailable");
// The failure limiter's store is down under `on_outage: closed`: 503, never a 401 or 429, which
// would blame the client (under `open` and `local` the limiter answers and nothing fails).
const LIMITS_UNAVAILABLE = errorReply(
  503,
  "limits_unavailable",
  "the failure limiter cannot be reached; try again shortly",
  { "retry-after": "1" },
);
// The revoked tokens cannot be read under `on_outage: closed`, as a limit that cannot count.
const REVOCATIONS_UNAVAILABLE = errorReply(
  503,
  "limits_unavailable",
  "the revoked tokens cannot be read; try again shortly",
  { "retry-after": "1" },
);

// The failure limiter throws only when its store is down under `on_outage: closed`.
function limiterCall<T>(
  services: Services,
  ctx: RequestContext,
  call: Promise<T>,
): Promise<T | typeof UNAVAILABLE> {
  return call.catch((error: unknown) => {
    services.log.debug({ requestId: ctx.requestId, err: error }, "failures not counted");
    return UNAVAILABLE;
  });
}

// A 503 for a store that cannot be reached is logged and counted with the decision the limits
// stage gives its own.
function unavailable(ctx: RequestContext, reply: Reply): Reply {
  ctx.decision = "limits_unavailable";
  return reply;
}

// Beyond `tokens.failure_limit`, an IP's new tokens are refused unverified, as the limits refuse.
function tooManyRefused(decision: FailureDecision, rule: FailureRule): Reply {
  const retryAfter = decision.retryAfterSeconds;
  return tooManyRequests(
    "rate_limited",
    `${BEARER_REFUSALS.rate_limited}: more than ${rule.limit} per ${rule.window}; retry after ${retryAfter} s`,
    retryAfter,
    rule.limit,
    rule.window,
  );
}

// RFC 6750 §2.3 and §5.3: a token in the URI leaks into logs and the upstream; it is refused,
// whether or not the header carries one too.
function queryHasAccessToken(query: string | null): boolean {
  if (query === null || !query.includes("access_token")) return false;
  return query
    .split("&")
    .some((part) => part === "access_token" || part.startsWith("access_token="));
}

// No bearer credentials: answered with the config's challenge.
const NO_CREDENTIALS = Symbol("no credentials");

/** The token from the Authorization header, or why there is none to verify. */
function bearerToken(ctx: RequestContext): string | Reply | typeof NO_CREDENTIALS {
  const { req } = ctx;
  const value = req.headers.authorization;
  if (value === undefined) return NO_CREDENTIALS;
  // Node keeps only the first Authorization line; RFC 9110 §5.3: it is not a list field.
  if (fieldLines(req.rawHeaders, "authorization") > 1) return TWO_AUTHORIZATIONS;
  const space = value.indexOf(" ");
  const scheme = space === -1 ? value : value.slice(0, space);
  // RFC 9110 §11.1: the scheme is case-insensitive; another scheme counts as no credentials.
  if (scheme.length !== 6 || scheme.toLowerCase() !== "bearer") return NO_CREDENTIALS;
  if (space === -1) return EMPTY_BEARER;
  let start = space + 1;
  while (value.charCodeAt(start) === 32) start++;
  const token = value.slice(start);
  if (token === "") return EMPTY_BEARER;
  if (token.length > MAX_BEARER_TOKEN_LENGTH) return TOO_LONG;
  return token;
}

// Refusals that never count against the address, the client did nothing wrong: an expired token
// was signed by its issuer (the client is renewing, not forging); an unknown `kid` is what every
// good token has after a provider rotates its keys, or gatehouse restarts with a generated key; a
// provider's client that is not listed, or whose id is taken, holds a genuine token.
const UNCOUNTED: ReadonlySet<TokenRule> = new Set<TokenRule>([
  "expired",
  "unknown_kid",
  "client_unknown",
  "client_id_collision",
]);

// A failed verification's rule and answer, and whether it counts against the address.
function rejection(
  error: TokenRejected | KeysUnavailable,
  invalid: InvalidTokenAnswers,
): readonly [BearerRefusal, Reply, boolean] {
  if (error instanceof KeysUnavailable) return [error.reason, keysUnavailable(error), false];
  return [error.reason, invalid[error.reason], !UNCOUNTED.has(error.reason)];
}

/**
 * Requires a valid access token on `auth: bearer` routes (RFC 6750), gatehouse's own or a trusted
 * issuer's (its keys from `keySetFor`), and records its client, issuer and scopes in `ctx`. A
 * token verified before answers from the cache, without a signature check. A token that fails
 * verification, other than by expiring, naming an unknown key or an unlisted or taken client, counts
 * against its client IP in `failures`; beyond the limit, the IP's tokens that are not in the cache
 * are refused without a check. A revoked token (RFC 7009, by its `jti` in `marks`) is refused.
 * Every refusal names its rule: in words in its answer, and as `bearer_<rule>` in the access log's
 * `reason` and in gatehouse_auth_failures_total. Its 401 challenges are `challenge`'s, which
 * point to the protected resource metadata.
 */
export function createAuthenticateStage(
  settings: TokenSettings,
  failures: FailureLimiter,
  marks: TokenMarks,
  services: Services,
  keySetFor: KeySetFor,
  challenge: BearerChallenge,
): Stage {
  const { metrics, now } = services;
  const missing = missingAnswer(challenge);
  const invalid = invalidTokenAnswers(challenge);
  const verifier = createTokenVerifier(settings, keySetFor);
  const clients = settings.clients.ids;

  const refuse = (ctx: RequestContext, rule: BearerRefusal, reply: Reply): Reply =>
    refused(ctx, metrics.authFailures, rule, reply);

  const admit = (
    ctx: RequestContext,
    token: VerifiedToken,
    revoked: boolean | "unavailable",
  ): Reply | undefined => {
    if (revoked === "unavailable") return unavailable(ctx, REVOCATIONS_UNAVAILABLE);
    if (revoked) return refuse(ctx, "revoked", invalid.revoked);
    ctx.clientId = token.clientId;
    ctx.issuer = token.issuer;
    ctx.clientKey = token.clientKey;
    ctx.scopes = token.scopes;
    return undefined;
  };

  const accept = (
    ctx: RequestContext,
    token: VerifiedToken,
    nowMs: number,
  ): Reply | undefined | Promise<Reply | undefined> => {
    // RFC 9449 §7.2: a bound token is good only with a proof of its key.
    if (token.jkt !== undefined) return refuse(ctx, "bound_as_bearer", invalid.bound_as_bearer);
    // A provider's client was matched when its token was verified, by this snapshot's verifier;
    // revoking it is the provider's (RFC 7009 §2.2), so gatehouse's denylist has nothing of it.
    if (token.issuer !== OWN_ISSUER_NAME) return admit(ctx, token, false);
    // A token outlives a config change; its client must still be listed.
    if (!clients.has(token.clientId)) {
      return refuse(ctx, "client_unknown", invalid.client_unknown);
    }
    const revoked = marks.isRevoked(token.clientId, token.jti, nowMs);
    return revoked instanceof Promise
      ? revoked.then((settled) => admit(ctx, token, settled))
      : admit(ctx, token, revoked);
  };

  async function verifyNew(ctx: RequestContext, token: string, nowMs: number) {
    const early = await limiterCall(services, ctx, failures.peek(ctx.client.address));
    if (early === UNAVAILABLE) return unavailable(ctx, LIMITS_UNAVAILABLE);
    if (!early.allowed) {
      return refuse(ctx, "rate_limited", tooManyRefused(early, settings.failureLimit));
    }
    let verified: VerifiedToken;
    try {
      verified = await verifier.verify(token, nowMs);
    } catch (error) {
      if (!(error instanceof TokenRejected || error instanceof KeysUnavailable)) throw error;
      const [rule, reply, counts] = rejection(error, invalid);
      // The issuer's keys, not the upstream, answered 503: the metrics tell the two apart.
      if (error instanceof KeysUnavailable) ctx.decision = "keys_unavailable";
      if (counts) {
        const counted = await limiterCall(services, ctx, failures.failed(ctx.client.address));
        if (counted === UNAVAILABLE) return unavailable(ctx, LIMITS_UNAVAILABLE);
      }
      return refuse(ctx, rule, reply);
    }
    metrics.bearerTokensVerified.inc({ issuer: verified.issuer });
    return accept(ctx, verified, nowMs);
  }

  return function authenticate(ctx) {
    if (ctx.route?.auth !== "bearer") return undefined;
    const token = bearerToken(ctx);
    if (token === NO_CREDENTIALS) return refuse(ctx, "missing", missing);
    if (typeof token !== "string") return refuse(ctx, "malformed", token);
    const nowMs = now();
    const known = verifier.cached(token, nowMs);
    // A token verified before is a compact JWS and so a b64token: only a new one is scanned.
    if (known === undefined && !B64TOKEN.test(token)) {
      return refuse(ctx, "malformed", NOT_B64TOKEN);
    }
    if (queryHasAccessToken(ctx.query)) return refuse(ctx, "malformed", TOKEN_IN_QUERY);
    if (known !== undefined) return accept(ctx, known, nowMs);
    return verifyNew(ctx, token, nowMs);
  };
}
