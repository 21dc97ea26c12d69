/**
 * The refusals of `gatehouse token check`, in the vocabulary of the authenticate stage: the
 * verifier's own (TokenRejected's reason and message, as they stand), and the stage's checks
 * around the verifier. They are read here only, so that the vocabulary can change in one place.
 */
import { MAX_BEARER_TOKEN_LENGTH } from "../stages/authenticate.js";
import { KeysUnavailable } from "../tokens/provider-tokens.js";
import type { TokenRejected } from "../tokens/verify.js";

/** What gatehouse would do with the token. */
export type Verdict =
  | { readonly outcome: "accepted" }
  | {
      readonly outcome: "refused";
      /** The rule the token broke: the verifier's reason, or the stage's own. */
      readonly reason: string;
      readonly message: string;
      /** The answer: its status and `error` code. */
      readonly status: number;
      readonly error: string;
    }
  /** The token's keys exist only in the running process: nothing can be said offline. */
  | { readonly outcome: "unchecked"; readonly message: string };

type Refusal = Extract<Verdict, { outcome: "refused" }>;

/** The verifier's refusal as the authenticate stage answers it. */
export function refusalOf(error: TokenRejected | KeysUnavailable): Refusal {
  if (error instanceof KeysUnavailable) {
    // An unknown kid while the issuer's keys cannot be fetched: 503, the token may be good.
    return {
      outcome: "refused",
      reason: "keys_unavailable",
      message: error.message,
      status: 503,
      error: "temporarily_unavailable",
    };
  }
  return {
    outcome: "refused",
    reason: error.reason,
    message: error.message,
    status: 401,
    error: "invalid_token",
  };
}

/** What the authenticate stage refuses itself, before and after the verifier. */
export const STAGE_REFUSALS = {
  tooLong: {
    outcome: "refused",
    reason: "malformed",
    message: `the bearer token must be at most ${MAX_BEARER_TOKEN_LENGTH} bytes`,
    status: 400,
    error: "invalid_request",
  },
  notB64Token: {
    outcome: "refused",
    reason: "malformed",
    message: "the bearer token has characters a token cannot have",
    status: 400,
    error: "invalid_request",
  },
  clientGone: {
    outcome: "refused",
    reason: "unknown_client",
    message: "the bearer token's client is no longer configured",
    status: 401,
    error: "invalid_token",
  },
  revoked: {
    outcome: "refused",
    reason: "revoked",
    message: "the bearer token has been revoked",
    status: 401,
    error: "invalid_token",
  },
} as const satisfies Record<string, Refusal>;

// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Why the stage refuses `token` before the verifier reads it; undefined when it does not. */
export function syntaxRefusal(token: string): Refusal | undefined {
  if (token.length > MAX_BEARER_TOKEN_LENGTH) return STAGE_REFUSALS.tooLong;
  return B64TOKEN.test(token) ? undefined : STAGE_REFUSALS.notB64Token;
}
