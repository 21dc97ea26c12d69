import type { FailureRule, TokenSettings } from "../tokens/settings.js";
import type { FailureDecision, FailureLimiter } from "../limits/failures.js";
import { tooManyRequests } from "../limits/headers.js";
import { errorReply, type Reply, type RequestContext, type Stage } from "../core/context.js";
import type { Services } from "../core/services.js";
import { TokenRejected, type TokenVerifier, type VerifiedToken } from "../tokens/verify.js";
import { KeysUnavailable } from "../tokens/provider-tokens.js";
import { OWN_ISSUER_NAME } from "../config/issuers-schema.js";
import type { TokenMarks } from "../tokens/marks.js";
import { variantOf, type Challenges } from "../tokens/metadata.js";
import {
  invalidTokenAnswers,
  missingAnswers,
  refused,
  type InvalidTokenAnswers,
} from "../tokens/bearer-answers.js";
import { BEARER_REFUSALS, type BearerRefusal, type TokenRule } from "../tokens/refusal-reasons.js";
import { B64TOKEN, NO_CREDENTIALS, NOT_B64TOKEN, readCredentials } from "../tokens/credentials.js";
import { createDoorProofs, type DoorProofs, type ProofOutcome } from "../tokens/dpop-door.js";

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
// The used DPoP proofs cannot be read under `on_outage: closed`: a replay could not be told.
const PROOFS_UNAVAILABLE = errorReply(
  503,
  "limits_unavailable",
  "the used DPoP proofs cannot be read; try again shortly",
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

// The token passed: its client, issuer and scopes are the request's.
function admitted(ctx: RequestContext, verified: VerifiedToken): undefined {
  ctx.clientId = verified.clientId;
  ctx.issuer = verified.issuer;
  ctx.clientKey = verified.clientKey;
  ctx.scopes = verified.scopes;
  ctx.token = verified;
  return undefined;
}

/** The answers of a refusal on the request's route, to the scheme it used. */
function invalidFor(
  ctx: RequestContext,
  invalid: ReturnType<typeof invalidTokenAnswers>,
): InvalidTokenAnswers {
  return invalid[variantOf(ctx.route?.dpopRequired === true, ctx.dpop)];
}

/** How the stage refuses: recorded, counted against the address, or before anything is verified. */
interface Refusals {
  refuse(ctx: RequestContext, rule: BearerRefusal, reply: Reply): Reply;
  /** Counts the refusal against the client's address, then refuses. */
  refuseCounted(ctx: RequestContext, rule: BearerRefusal, reply: Reply): Promise<Reply>;
  /** The address over the failure limit is refused before anything new is verified for it. */
  overLimit(ctx: RequestContext): Promise<Reply | undefined>;
}

function refusals(settings: TokenSettings, failures: FailureLimiter, services: Services): Refusals {
  const refuse = (ctx: RequestContext, rule: BearerRefusal, reply: Reply): Reply =>
    refused(ctx, services.metrics.authFailures, rule, reply);
  return {
    refuse,
    async refuseCounted(ctx, rule, reply) {
      const counted = await limiterCall(services, ctx, failures.failed(ctx.client.address));
      if (counted === UNAVAILABLE) return unavailable(ctx, LIMITS_UNAVAILABLE);
      return refuse(ctx, rule, reply);
    },
    async overLimit(ctx) {
      const early = await limiterCall(services, ctx, failures.peek(ctx.client.address));
      if (early === UNAVAILABLE) return unavailable(ctx, LIMITS_UNAVAILABLE);
      if (early.allowed) return undefined;
      return refuse(ctx, "rate_limited", tooManyRefused(early, settings.failureLimit));
    },
  };
}

/**
 * RFC 9449 §7.1 and §7.2: a bound token only with a proof of its key, made for this request; the
 * DPoP scheme only with a bound token; a route requiring DPoP takes no plain token. Invalid
 * proofs count against the address as bad signatures do.
 */
function keyBinding(
  invalid: ReturnType<typeof invalidTokenAnswers>,
  proofs: DoorProofs,
  { refuse, refuseCounted, overLimit }: Refusals,
) {
  const proofRefused = (
    ctx: RequestContext,
    outcome: ProofOutcome,
  ): Reply | undefined | Promise<Reply> => {
    if (outcome === undefined) return undefined;
    if (outcome === "unavailable") return unavailable(ctx, PROOFS_UNAVAILABLE);
    return outcome.counts
      ? refuseCounted(ctx, outcome.rule, outcome.reply)
      : refuse(ctx, outcome.rule, outcome.reply);
  };

  async function proveKey(
    ctx: RequestContext,
    token: string,
    clientKey: string,
    jkt: string,
    nowMs: number,
  ) {
    const over = await overLimit(ctx);
    if (over !== undefined) return over;
    return proofRefused(ctx, await proofs.check(ctx, token, clientKey, jkt, nowMs));
  }

  return (
    ctx: RequestContext,
    token: string,
    verified: VerifiedToken,
    nowMs: number,
  ): Reply | undefined | Promise<Reply | undefined> => {
    if (!ctx.dpop) {
      if (verified.jkt !== undefined) {
        return refuse(ctx, "bound_as_bearer", invalidFor(ctx, invalid).bound_as_bearer);
      }
      if (ctx.route?.dpopRequired === true) {
        return refuse(ctx, "dpop_required", invalidFor(ctx, invalid).dpop_required);
      }
      return undefined;
    }
    if (verified.jkt === undefined) {
      return refuse(ctx, "not_bound", invalidFor(ctx, invalid).not_bound);
    }
    return proveKey(ctx, token, verified.clientKey, verified.jkt, nowMs);
  };
}

/**
 * Requires a valid access token on `auth: bearer` routes (RFC 6750), gatehouse's own or a trusted
 * issuer's, by `verifier`, and records its client, issuer and scopes in `ctx`. A token verified
 * before answers from the verifier's cache, without a signature check. A token that fails
 * verification, other than by expiring, naming an unknown key or an unlisted or taken client, counts
 * against its client IP in `failures`; beyond the limit, the IP's tokens that are not in the cache
 * are refused without a check. A revoked token (RFC 7009, by its `jti` in `marks`) is refused.
 * Every refusal names its rule: in words in its answer, and as `bearer_<rule>` in the access log's
 * `reason` and in gatehouse_auth_failures_total. Its 401 challenges are `challenge`'s, which
 * point to the protected resource metadata.
 */
export function createAuthenticateStage(
  settings: TokenSettings,
  verifier: TokenVerifier,
  failures: FailureLimiter,
  marks: TokenMarks,
  services: Services,
  challenges: Challenges,
): Stage {
  const missing = missingAnswers(challenges);
  const invalid = invalidTokenAnswers(challenges);

  const refusing = refusals(settings, failures, services);
  const { refuse, refuseCounted, overLimit } = refusing;
  const proofs = createDoorProofs(settings, marks, challenges, services.log);
  const bound = keyBinding(invalid, proofs, refusing);

  const admit = (
    ctx: RequestContext,
    token: string,
    verified: VerifiedToken,
    revoked: boolean | "unavailable",
    nowMs: number,
  ): Reply | undefined | Promise<Reply | undefined> => {
    if (revoked === "unavailable") return unavailable(ctx, REVOCATIONS_UNAVAILABLE);
    if (revoked) return refuse(ctx, "revoked", invalidFor(ctx, invalid).revoked);
    const binding = bound(ctx, token, verified, nowMs);
    if (binding instanceof Promise) {
      return binding.then((reply) => reply ?? admitted(ctx, verified));
    }
    return binding ?? admitted(ctx, verified);
  };

  const accept = (
    ctx: RequestContext,
    token: string,
    verified: VerifiedToken,
    nowMs: number,
  ): Reply | undefined | Promise<Reply | undefined> => {
    // A provider's client was matched when its token was verified, by this snapshot's verifier;
    // revoking it is the provider's (RFC 7009 §2.2), so gatehouse's denylist has nothing of it.
    if (verified.issuer !== OWN_ISSUER_NAME) return admit(ctx, token, verified, false, nowMs);
    // A token outlives a config change; its client must still be listed.
    if (!settings.clients.ids.has(verified.clientId)) {
      return refuse(ctx, "client_unknown", invalidFor(ctx, invalid).client_unknown);
    }
    const revoked = marks.isRevoked(verified.clientId, verified.jti, nowMs);
    return revoked instanceof Promise
      ? revoked.then((settled) => admit(ctx, token, verified, settled, nowMs))
      : admit(ctx, token, verified, revoked, nowMs);
  };

  async function verifyNew(ctx: RequestContext, token: string, nowMs: number) {
    const over = await overLimit(ctx);
    if (over !== undefined) return over;
    let verified: VerifiedToken;
    try {
      verified = await verifier.verify(token, nowMs);
    } catch (error) {
      if (!(error instanceof TokenRejected || error instanceof KeysUnavailable)) throw error;
      const [rule, reply, counts] = rejection(error, invalidFor(ctx, invalid));
      // The issuer's keys, not the upstream, answered 503: the metrics tell the two apart.
      if (error instanceof KeysUnavailable) ctx.decision = "keys_unavailable";
      return counts ? refuseCounted(ctx, rule, reply) : refuse(ctx, rule, reply);
    }
    services.metrics.bearerTokensVerified.inc({ issuer: verified.issuer });
    return accept(ctx, token, verified, nowMs);
  }

  return function authenticate(ctx) {
    const route = ctx.route;
    if (route?.auth !== "bearer") return undefined;
    const token = readCredentials(ctx, route.tokenFrom);
    if (token === NO_CREDENTIALS) {
      return refuse(ctx, "missing", missing[variantOf(route.dpopRequired, false)]);
    }
    if (typeof token !== "string") return refuse(ctx, "malformed", token);
    // Before the token is verified: a proof too long to check costs no signature check at all.
    const large = ctx.dpop ? proofs.tooLarge(ctx) : undefined;
    if (large !== undefined) return refuseCounted(ctx, large.rule, large.reply);
    const nowMs = services.now();
    const known = verifier.cached(token, nowMs);
    // A token verified before is a compact JWS and so a b64token: only a new one is scanned.
    if (known === undefined && !B64TOKEN.test(token)) {
      return refuse(ctx, "malformed", NOT_B64TOKEN);
    }
    if (known !== undefined) return accept(ctx, token, known, nowMs);
    return verifyNew(ctx, token, nowMs);
  };
}
