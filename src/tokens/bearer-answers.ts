/**
 * The answers of bearer enforcement, built once per config from each rule's words
 * (BEARER_REFUSALS), and how a refusal is recorded: its `bearer_<rule>` reason in the request's
 * access log line and in gatehouse_auth_failures_total.
 */
import type { Counter } from "prom-client";
import { errorReply, type Reply, type RequestContext } from "../core/context.js";
import type { ErrorCode } from "../http/error-codes.js";
import type { ScopeRule } from "../routes/table.js";
import { CHALLENGE_VARIANTS, type ChallengeVariant, type Challenges } from "./metadata.js";
import {
  BEARER_REFUSALS,
  INVALID_TOKEN_RULES,
  refusalReason,
  type BearerRefusal,
  type InvalidTokenRule,
} from "./refusal-reasons.js";
import { PROOF_RULES, type ProofRule } from "./dpop-proof.js";

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

/** An answer built once per config for each challenge variant. */
export type ByVariant<T> = Readonly<Record<ChallengeVariant, T>>;

function byVariant<T>(build: (variant: ChallengeVariant) => T): ByVariant<T> {
  const answers: Partial<Record<ChallengeVariant, T>> = {};
  for (const variant of CHALLENGE_VARIANTS) answers[variant] = build(variant);
  return answers as ByVariant<T>;
}

/** The 401 `invalid_token` of each rule. */
export type InvalidTokenAnswers = Readonly<Record<InvalidTokenRule, Reply>>;

/**
 * The 401 answers of a config, whose challenges point to its protected resource metadata: each
 * says its rule's words in `error_description` (RFC 6750 §3) and in the body's `message`.
 */
export function invalidTokenAnswers(challenges: Challenges): ByVariant<InvalidTokenAnswers> {
  return byVariant((variant) => {
    const answers: Partial<Record<InvalidTokenRule, Reply>> = {};
    for (const rule of INVALID_TOKEN_RULES) {
      const words = BEARER_REFUSALS[rule];
      answers[rule] = errorReply(401, "invalid_token", words, {
        "www-authenticate": challenges(
          variant,
          `error="invalid_token", error_description="${words}"`,
        ),
      });
    }
    return answers as InvalidTokenAnswers;
  });
}

/**
 * RFC 9449 §7.1: the 401 `invalid_dpop_proof` of each rule a proof can break but the nonce's,
 * whose answer carries a nonce of its moment (`nonceAnswer`).
 */
export function invalidProofAnswers(
  challenges: Challenges,
): ByVariant<Readonly<Record<ProofRule, Reply>>> {
  return byVariant((variant) => {
    const answers: Partial<Record<ProofRule, Reply>> = {};
    for (const [rule, words] of Object.entries(PROOF_RULES) as Array<[ProofRule, string]>) {
      answers[rule] = errorReply(401, "invalid_dpop_proof", words, {
        "www-authenticate": challenges(
          variant,
          `error="invalid_dpop_proof", error_description="${words}"`,
        ),
      });
    }
    return answers as Readonly<Record<ProofRule, Reply>>;
  });
}

/** RFC 9449 §9: a proof without the current nonce is answered with one to use. */
export function nonceAnswer(challenges: Challenges, variant: ChallengeVariant, nonce: string) {
  const words = PROOF_RULES.nonce;
  return errorReply(401, "use_dpop_nonce", words, {
    "www-authenticate": challenges(variant, `error="use_dpop_nonce", error_description="${words}"`),
    "dpop-nonce": nonce,
  });
}

/** RFC 6750 §3.1: a request without credentials gets a challenge without an error code. */
export function missingAnswers(challenges: Challenges): ByVariant<Reply> {
  return byVariant((variant) =>
    errorReply(401, "unauthorized", BEARER_REFUSALS.missing, {
      "www-authenticate": challenges(variant),
    }),
  );
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
export function insufficientScopeAnswers(
  scopes: ScopeRule,
  challenges: Challenges,
): ByVariant<Reply> {
  const error: ErrorCode = "insufficient_scope";
  const words = BEARER_REFUSALS.insufficient_scope;
  const needed = scopes.every ? "every one of these scopes" : "one of these scopes";
  return byVariant((variant) => ({
    status: 403,
    headers: {
      "www-authenticate": challenges(
        variant,
        `error="insufficient_scope", error_description="${words}", scope="${scopes.text}"`,
      ),
    },
    body: {
      error,
      message: `this route needs a token granted ${needed}: ${scopes.text}`,
      scope: scopes.text,
    },
  }));
}
