/**
 * The answers of bearer enforcement, built once per config from each rule's words
 * (BEARER_REFUSALS), and how a refusal is recorded: its `bearer_<rule>` reason in the request's
 * access log line and in gatehouse_auth_failures_total.
 */
import type { Counter } from "prom-client";
import { errorReply, type Reply, type RequestContext } from "../core/context.js";
import type { ErrorCode } from "../http/error-codes.js";
import type { ScopeRule } from "../routes/table.js";
import type { BearerChallenge } from "./metadata.js";
import {
  BEARER_REFUSALS,
  refusalReason,
  TOKEN_RULES,
  type BearerRefusal,
  type TokenRule,
} from "./refusal-reasons.js";

/** Records that `ctx`'s request was refused for `rule`, and returns the answer. */
export function refused(
  ctx: RequestContext,
  failures: Counter<"reason">,
  rule: BearerRefusal,
  reply: Reply,
): Reply {
  const reason = refusalReason(rule);
  ctx.refusal = reason;
  failures.inc({ reason });
  return reply;
}

/** The 401 `invalid_token` of each rule a token can break, and of a revoked token. */
export type InvalidTokenAnswers = Readonly<Record<TokenRule | "revoked", Reply>>;

/**
 * The 401 answers of a config, whose challenges point to its protected resource metadata: each
 * says its rule's words in `error_description` (RFC 6750 §3) and in the body's `message`.
 */
export function invalidTokenAnswers(challenge: BearerChallenge): InvalidTokenAnswers {
  const answers: Partial<Record<TokenRule | "revoked", Reply>> = {};
  for (const rule of [...TOKEN_RULES, "revoked"] as const) {
    const words = BEARER_REFUSALS[rule];
    answers[rule] = errorReply(401, "invalid_token", words, {
      "www-authenticate": challenge(`error="invalid_token", error_description="${words}"`),
    });
  }
  return answers as InvalidTokenAnswers;
}

/** RFC 6750 §3.1: a request without credentials gets a challenge without an error code. */
export function missingAnswer(challenge: BearerChallenge): Reply {
  return errorReply(401, "unauthorized", BEARER_REFUSALS.missing, {
    "www-authenticate": challenge(),
  });
}

/**
 * A 400 for a request whose credentials cannot be read (RFC 6750 §3.1 `invalid_request`): the
 * rule's words and `detail`, how, in the challenge and the body alike.
 */
export function malformedAnswer(detail: string): Reply {
  const words = `${BEARER_REFUSALS.malformed}: ${detail}`;
  return errorReply(400, "invalid_request", words, {
    "www-authenticate": `Bearer realm="gatehouse", error="invalid_request", error_description="${words}"`,
  });
}

/**
 * RFC 6750 §3.1: a valid token without the scope the resource needs is answered 403 with
 * `insufficient_scope` and the scopes needed (`every`: all of them, else one); the body says the
 * same in JSON.
 */
export function insufficientScopeAnswer(scopes: ScopeRule, challenge: BearerChallenge): Reply {
  const error: ErrorCode = "insufficient_scope";
  const words = BEARER_REFUSALS.insufficient_scope;
  const needed = scopes.every ? "every one of these scopes" : "one of these scopes";
  return {
    status: 403,
    headers: {
      "www-authenticate": challenge(
        `error="insufficient_scope", error_description="${words}", scope="${scopes.text}"`,
      ),
    },
    body: {
      error,
      message: `this route needs a token granted ${needed}: ${scopes.text}`,
      scope: scopes.text,
    },
  };
}
