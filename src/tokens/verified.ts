/** What verifying a bearer token yields: the token's facts, or why it was refused. */
import type { GrantedScopes } from "../core/context.js";

/** Why a token was refused; the reason feeds logs and metrics, never the client's answer. */
export class TokenRejected extends Error {
  constructor(
    readonly reason:
      | "malformed"
      | "unknown_kid"
      | "expired"
      | "claims"
      | "invalid"
      | "sender_constrained"
      | "unknown_client"
      | "client_id_collision",
    message: string,
  ) {
    super(message);
    this.name = "TokenRejected";
  }
}

/**
 * What a verified token says, read once: its client, its issuer, its scopes, its `jti`, and
 * until when it is accepted (epoch ms).
 */
export interface VerifiedToken {
  /** The client claim as the token carries it (X-Client-Id). */
  readonly clientId: string;
  /** The issuer's name: `own` for gatehouse's tokens, else a `trusted_issuers` name. */
  readonly issuer: string;
  /** The client's plan and counters key: its id for an own client, `<issuer>:<id>` else. */
  readonly clientKey: string;
  readonly scopes: GrantedScopes;
  /** "" for a provider's token without one (revocation is the provider's). */
  readonly jti: string;
  readonly untilMs: number;
}

/** The scopes of a token that carries none. */
export const NO_SCOPES: GrantedScopes = Object.freeze({ text: "", names: new Set<string>() });
