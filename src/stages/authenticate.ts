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

/** Longest bearer token read; a longer one is refused before any parsing. */
export const MAX_BEARER_TOKEN_LENGTH = 4096;

// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

function invalidRequest(message: string): Reply {
  return errorReply(400, "invalid_request", message, {
    "www-authenticate": 'Bearer realm="gatehouse", error="invalid_request"',
  });
}

const TWO_AUTHORIZATIONS = invalidRequest("the request has more than one Authorization header");
const EMPTY_BEARER = invalidRequest("the Bearer scheme needs a token");
const NOT_B64TOKEN = invalidRequest("the bearer token has characters a token cannot have");
const TOO_LONG = invalidRequest(
  `the bearer token must be at most ${MAX_BEARER_TOKEN_LENGTH} bytes`,
);
const TOKEN_IN_QUERY = invalidRequest("send the token in the Authorization header, not the URI");

/** The 401 answers of a config: their challenges point to its protected resource metadata. */
function refusals(challenge: BearerChallenge) {
  const invalidToken = (message: string, description?: string): Reply =>
    errorReply(401, "invalid_token", message, {
      "www-authenticate": challenge(
        description === undefined
          ? 'error="invalid_token"'
          : `error="invalid_token", error_description="${description}"`,
      ),
    });
  return {
    // RFC 6750 §3.1: a request without credentials gets a challenge without an error code.
    missing: errorReply(401, "unauthorized", "this route requires a bearer token", {
      "www-authenticate": challenge(),
    }),
    invalid: invalidToken("the bearer token is not valid"),
    expired: invalidToken("the bearer token has expired"),
    clientGone: invalidToken("the bearer token's client is no longer configured"),
    revoked: invalidToken("the bearer token has been revoked"),
    // RFC 9449 §7.1, RFC 8705 §3: a bound token used as a bearer token; the description says
    // why, so the client's developer need not guess.
    senderConstrained: invalidToken(
      "the bearer token is bound to a key (cnf); sender-constrained tokens are not supported",
      "sender-constrained tokens are not supported",
    ),
    // A provider's client that is not listed, whose id is one of gatehouse's own clients' ids:
    // the upstream, reading X-Client-Id, could not tell the two apart.
    clientIdCollision: invalidToken(
      "the bearer token's client id is the id of one of gatehouse's own clients, and its issuer does not list it",
      "the client id is taken by another client",
    ),
  };
}

type Refusals = ReturnType<typeof refusals>;

// A provider's unknown `kid` while its keys cannot be fetched: the token may be good, so it must
// not be thrown away as a 401 would make the client do.
function keysUnavailable(error: KeysUnavailable): Reply {
  return errorReply(
    503,
    "temporarily_unavailable",
    `the keys of the token's issuer (${error.issuer}) cannot be fetched; retry after ${error.retryAfterSeconds} s`,
    { "retry-after": String(error.retryAfterSeconds) },
  );
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
    `more than ${rule.limit} refused bearer tokens from this address per ${rule.window}; retry after ${retryAfter} s`,
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
function uncounted(
  error: TokenRejected | KeysUnavailable,
  answers: Refusals,
): readonly [string, Reply] | undefined {
  if (error instanceof KeysUnavailable) return ["bearer_keys_unavailable", keysUnavailable(error)];
  if (error.reason === "expired") return ["bearer_expired", answers.expired];
  if (error.reason === "unknown_kid") return ["bearer_unknown_kid", answers.invalid];
  if (error.reason === "unknown_client") return ["bearer_client_removed", answers.clientGone];
  if (error.reason === "client_id_collision") {
    return ["bearer_client_id_collision", answers.clientIdCollision];
  }
  return undefined;
}

// A refusal that counts against the address: the token's reason for the metric, and the answer.
function refusal(
  error: TokenRejected | KeysUnavailable,
  answers: Refusals,
): readonly [string, Reply] {
  return error instanceof TokenRejected && error.reason === "sender_constrained"
    ? ["bearer_sender_constrained", answers.senderConstrained]
    : ["bearer_invalid", answers.invalid];
}

/**
 * Requires a valid access token on `auth: bearer` routes (RFC 6750), gatehouse's own or a trusted
 * issuer's (its keys from `keySetFor`), and records its client, issuer and scopes in `ctx`. A
 * token verified before answers from the cache, without a signature check. A token that fails
 * verification, other than by expiring, naming an unknown key or an unlisted client, counts
 * against its client IP in `failures`; beyond the limit, the IP's tokens that are not in the cache
 * are refused without a check. A revoked token (RFC 7009, by its `jti` in `marks`) is refused.
 * Its 401 challenges are `challenge`'s, which point to the protected resource metadata.
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
  const answers = refusals(challenge);
  const verifier = createTokenVerifier(settings, keySetFor);
  const clients = settings.clients.ids;

  const refuse = (reason: string, reply: Reply): Reply => {
    metrics.authFailures.inc({ reason });
    return reply;
  };

  const admit = (
    ctx: RequestContext,
    token: VerifiedToken,
    revoked: boolean | "unavailable",
  ): Reply | undefined => {
    if (revoked === "unavailable") return unavailable(ctx, REVOCATIONS_UNAVAILABLE);
    if (revoked) return refuse("bearer_revoked", answers.revoked);
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
    // A provider's client was matched when its token was verified, by this snapshot's verifier;
    // revoking it is the provider's (RFC 7009 §2.2), so gatehouse's denylist has nothing of it.
    if (token.issuer !== OWN_ISSUER_NAME) return admit(ctx, token, false);
    // A token outlives a config change; its client must still be listed.
    if (!clients.has(token.clientId)) return refuse("bearer_client_removed", answers.clientGone);
    const revoked = marks.isRevoked(token.clientId, token.jti, nowMs);
    return revoked instanceof Promise
      ? revoked.then((settled) => admit(ctx, token, settled))
      : admit(ctx, token, revoked);
  };

  async function verifyNew(ctx: RequestContext, token: string, nowMs: number) {
    const ip = ctx.client.address;
    const early = await limiterCall(services, ctx, failures.peek(ip));
    if (early === UNAVAILABLE) return unavailable(ctx, LIMITS_UNAVAILABLE);
    if (!early.allowed) {
      return refuse("bearer_rate_limited", tooManyRefused(early, settings.failureLimit));
    }
    let verified: VerifiedToken;
    try {
      verified = await verifier.verify(token, nowMs);
    } catch (error) {
      if (!(error instanceof TokenRejected || error instanceof KeysUnavailable)) throw error;
      const answer = uncounted(error, answers);
      if (answer !== undefined) return refuse(...answer);
      const counted = await limiterCall(services, ctx, failures.failed(ip));
      return counted === UNAVAILABLE
        ? unavailable(ctx, LIMITS_UNAVAILABLE)
        : refuse(...refusal(error, answers));
    }
    metrics.bearerTokensVerified.inc({ issuer: verified.issuer });
    return accept(ctx, verified, nowMs);
  }

  return function authenticate(ctx) {
    if (ctx.route?.auth !== "bearer") return undefined;
    const token = bearerToken(ctx);
    if (token === NO_CREDENTIALS) return refuse("bearer_missing", answers.missing);
    if (typeof token !== "string") return refuse("bearer_malformed", token);
    const nowMs = now();
    const known = verifier.cached(token, nowMs);
    // A token verified before is a compact JWS and so a b64token: only a new one is scanned.
    if (known === undefined && !B64TOKEN.test(token)) {
      return refuse("bearer_malformed", NOT_B64TOKEN);
    }
    if (queryHasAccessToken(ctx.query)) return refuse("bearer_malformed", TOKEN_IN_QUERY);
    if (known !== undefined) return accept(ctx, known, nowMs);
    return verifyNew(ctx, token, nowMs);
  };
}
