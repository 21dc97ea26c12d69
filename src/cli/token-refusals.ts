/**
 * The refusals of `gatehouse token check`, in the authenticate stage's vocabulary: each names its
 * rule (logged and counted as `bearer_<rule>`) and says it in the words a client is answered
 * with, followed by what the verifier found, which a client is never told.
 */
import { unreadableToken } from "../tokens/credentials.js";
import { KeysUnavailable } from "../tokens/provider-tokens.js";
import { BEARER_REFUSALS, refusalReason, type BearerRefusal } from "../tokens/refusal-reasons.js";
import type { TokenRejected } from "../tokens/verify.js";

/** What gatehouse would do with the token. */
export type Verdict =
  | { readonly outcome: "accepted" }
  | {
      readonly outcome: "refused";
      /** The rule the token broke, as the log and the metric name it: `bearer_<rule>`. */
      readonly reason: string;
      readonly message: string;
      /** The answer: its status and `error` code. */
      readonly status: number;
      readonly error: string;
    }
  /** The token's keys exist only in the running process: nothing can be said offline. */
  | { readonly outcome: "unchecked"; readonly message: string };

type Refusal = Extract<Verdict, { outcome: "refused" }>;

function refusal(rule: BearerRefusal, detail: string, status: number, error: string): Refusal {
  const words = BEARER_REFUSALS[rule];
  const message = detail === words ? words : `${words}: ${detail}`;
  return { outcome: "refused", reason: refusalReason(rule), message, status, error };
}

/** The verifier's refusal as the authenticate stage answers it. */
export function refusalOf(error: TokenRejected | KeysUnavailable): Refusal {
  // The issuer's keys cannot be fetched, or its kid waits for the next fetch: 503, the token
  // may be good.
  if (error instanceof KeysUnavailable) {
    return refusal(error.reason, error.message, 503, "temporarily_unavailable");
  }
  return refusal(error.reason, error.message, 401, "invalid_token");
}

/** What the authenticate stage refuses itself, after the verifier. */
export const STAGE_REFUSALS = {
  clientGone: refusal(
    "client_unknown",
    "the token's client is no longer in the configuration",
    401,
    "invalid_token",
  ),
  revoked: refusal("revoked", BEARER_REFUSALS.revoked, 401, "invalid_token"),
} as const satisfies Record<string, Refusal>;

/** Why the stage refuses `token` before the verifier reads it; undefined when it does not. */
export function syntaxRefusal(token: string): Refusal | undefined {
  const problem = unreadableToken(token);
  return problem === undefined ? undefined : refusal("malformed", problem, 400, "invalid_request");
}
