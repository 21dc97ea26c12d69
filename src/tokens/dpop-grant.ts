/**
 * DPoP at the token endpoint (RFC 9449 §5): a token request may carry one proof of a key the
 * client holds; its token is then bound to that key (`cnf.jkt`, §6.1) and answered as
 * `token_type: DPoP`. A client with `dpop: required` must send one (§5.2). Asked only once the
 * client has authenticated, so that only an authenticated client's proof ids are held; a `DPoP`
 * header too long to be a proof is refused before anything is checked. Every refused proof, one
 * without the current nonce included, counts against the address in `tokens.failure_limit`, as
 * a failed client authentication does: each cost a signature check.
 */
import type { Reply, RequestContext } from "../core/context.js";
import type { Services } from "../core/services.js";
import type { FailureLimiter } from "../limits/failures.js";
import { limiterCall, oauthError, retryShortly } from "./authenticate-client.js";
import {
  createProofVerifier,
  PROOF_RULES,
  proofTooLarge,
  useProof,
  type ProofRule,
} from "./dpop-proof.js";
import { expectedHtu } from "./dpop-url.js";
import type { TokenMarks } from "./marks.js";
import { publishedIssuer } from "./metadata.js";
import type { TokenSettings } from "./settings.js";

/** What a token request's proof gave: the key its token is bound to, and headers to answer with. */
export interface TokenBinding {
  /** The proof key's RFC 7638 thumbprint; undefined: no proof, a Bearer token. */
  readonly jkt: string | undefined;
  readonly headers: Readonly<Record<string, string>>;
}

/** Binds token requests to the keys of their proofs, for one configuration. */
export interface TokenDpop {
  /** The refusal of a request whose `DPoP` header is too long to check, before anything else. */
  tooLarge(ctx: RequestContext): Promise<Reply> | undefined;
  /** The binding of `clientId`'s request on `ctx` at `nowMs`, or the answer refusing it. */
  bind(ctx: RequestContext, clientId: string, nowMs: number): Promise<TokenBinding | Reply>;
}

const BEARER: TokenBinding = { jkt: undefined, headers: {} };

/** A client with `dpop: required` asked without a proof. */
export const PROOF_REQUIRED = "this client must send a DPoP proof";

const REFUSALS = Object.fromEntries(
  Object.entries(PROOF_RULES).map(([rule, words]) => [
    rule,
    oauthError(400, "invalid_dpop_proof", words),
  ]),
) as Record<ProofRule, Reply>;

const REQUIRED = oauthError(400, "invalid_dpop_proof", PROOF_REQUIRED);
// Redis holds the used proof ids and cannot be reached under `on_outage: closed`.
const PROOFS_UNAVAILABLE = retryShortly("used DPoP proofs cannot be checked now");

/**
 * Token-endpoint DPoP for `settings`, its proofs' ids held in `marks`, its refusals counted in
 * `failures`. One verifier per configuration: its cache of proof keys is forgotten with it.
 */
export function createTokenDpop(
  settings: TokenSettings,
  marks: TokenMarks,
  failures: FailureLimiter,
  services: Services,
): TokenDpop {
  const { dpop } = settings;
  const verifier = createProofVerifier(dpop);
  // The token endpoint's URL as the RFC 8414 document publishes it; else the request's own.
  const origin = publishedIssuer(settings)?.origin;
  // RFC 9449 §8.2: a new nonce may be given in any answer; the client keeps the latest.
  const nonceHeaders = (nowMs: number): Record<string, string> =>
    dpop.nonces === undefined ? {} : { "dpop-nonce": dpop.nonces.current(nowMs) };

  // `more`: what else the log line says (an htu refusal names the URL the proof had to name).
  const refuse = (
    ctx: RequestContext,
    clientId: string | undefined,
    reason: string,
    reply: Reply,
    more: { readonly expectedHtu?: string } = {},
  ): Reply => {
    services.log.info(
      { requestId: ctx.requestId, clientId, reason, ...more },
      "DPoP proof refused",
    );
    return reply;
  };
  const refuseCounted = async (
    ctx: RequestContext,
    clientId: string | undefined,
    reason: string,
    reply: Reply,
    more?: { readonly expectedHtu?: string },
  ): Promise<Reply> => {
    await limiterCall({ services }, failures.failed(ctx.client.address));
    return refuse(ctx, clientId, reason, reply, more);
  };

  return {
    tooLarge(ctx) {
      if (!proofTooLarge(ctx.req)) return undefined;
      return refuseCounted(ctx, undefined, "too_large", REFUSALS.too_large);
    },
    async bind(ctx, clientId, nowMs) {
      if (ctx.req.headers.dpop === undefined) {
        return dpop.requiredClients.has(clientId)
          ? refuse(ctx, clientId, "required", REQUIRED)
          : BEARER;
      }
      const check = { method: "POST", url: expectedHtu(origin, ctx, settings.path) };
      const use = await useProof(verifier, marks.firstProof, ctx.req, clientId, check, nowMs);
      if (use === "unavailable") return PROOFS_UNAVAILABLE;
      if (typeof use === "object") return { jkt: use.jkt, headers: nonceHeaders(nowMs) };
      // A full share is the client's own volume, not a forgery.
      if (use === "full") return refuse(ctx, clientId, use, REFUSALS.full);
      // RFC 9449 §8: the nonce to use comes with the refusal.
      const reply =
        use === "nonce"
          ? oauthError(400, "use_dpop_nonce", PROOF_RULES.nonce, nonceHeaders(nowMs))
          : REFUSALS[use];
      const more = use === "htu" ? { expectedHtu: check.url } : {};
      return refuseCounted(ctx, clientId, use, reply, more);
    },
  };
}
