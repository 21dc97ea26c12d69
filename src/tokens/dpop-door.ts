/**
 * The proof a DPoP-bound token comes with at the door (RFC 9449 §7.1): a proof of the key the
 * token is bound to, made for this request (its method, the URL the client used, this token's
 * hash), never seen before. A `DPoP` header too long to be a proof is refused before anything is
 * verified, the token included.
 */
import type { Reply, RequestContext } from "../core/context.js";
import type { Services } from "../core/services.js";
import { invalidProofAnswers, nonceAnswer } from "./bearer-answers.js";
import { createProofVerifier, proofTooLarge, useProof } from "./dpop-proof.js";
import { expectedHtu, sentPath } from "./dpop-url.js";
import type { TokenMarks } from "./marks.js";
import { variantOf, type Challenges } from "./metadata.js";
import type { TokenSettings } from "./settings.js";
import type { BearerRefusal } from "./refusal-reasons.js";

/** A refused proof: its rule, its answer, and whether it counts against the client's address. */
export interface ProofRefusal {
  readonly rule: BearerRefusal;
  readonly reply: Reply;
  readonly counts: boolean;
}

/** What checking a request's proof found: nothing wrong, a refusal, or a store that is down. */
export type ProofOutcome = ProofRefusal | "unavailable" | undefined;

/** Checks, for one config, the proofs that bound tokens come with. */
export interface DoorProofs {
  /** The refusal of a `DPoP` header too long to be checked; undefined when it is not. */
  tooLarge(ctx: RequestContext): ProofRefusal | undefined;
  /**
   * Checks the proof of `accessToken`, bound to `jkt`, of the client `clientKey` (whose share of
   * used proof ids it takes).
   */
  check(
    ctx: RequestContext,
    accessToken: string,
    clientKey: string,
    jkt: string,
    nowMs: number,
  ): Promise<ProofOutcome>;
}

// `tokens.audience`'s origin when it is an http(s) URL: what the protected resource metadata
// publishes as the resource, and so the URL a client builds its requests on.
function audienceOrigin(audience: string): string | undefined {
  if (!URL.canParse(audience)) return undefined;
  const url = new URL(audience);
  return url.protocol === "https:" || url.protocol === "http:" ? url.origin : undefined;
}

/**
 * The proof checks of `settings`, recording first uses in `marks`. A proof refused for its `htu`
 * is logged to `log` with the URL it had to name, which the client cannot be told otherwise.
 */
export function createDoorProofs(
  settings: TokenSettings,
  marks: TokenMarks,
  challenges: Challenges,
  log: Services["log"],
): DoorProofs {
  const verifier = createProofVerifier(settings.dpop);
  const { nonces } = settings.dpop;
  const answers = invalidProofAnswers(challenges);
  const origin = audienceOrigin(settings.audience);

  const variantFor = (ctx: RequestContext) => variantOf(ctx.route?.dpopRequired === true, true);

  return {
    tooLarge(ctx) {
      if (!proofTooLarge(ctx.req)) return undefined;
      return { rule: "dpop_too_large", reply: answers[variantFor(ctx)].too_large, counts: true };
    },
    async check(ctx, accessToken, clientKey, jkt, nowMs) {
      const variant = variantFor(ctx);
      const { req } = ctx;
      const check = {
        method: req.method as string,
        url: expectedHtu(origin, ctx, sentPath(ctx)),
        // A WebSocket client names the URL it opened, in ws or wss.
        webSocket: ctx.upgrade !== undefined,
        accessToken,
        jkt,
      };
      const use = await useProof(verifier, marks.firstProof, req, clientKey, check, nowMs);
      if (use === "unavailable") return use;
      if (typeof use === "object") return undefined;
      if (use === "htu") {
        const { requestId } = ctx;
        log.info(
          { requestId, clientId: clientKey, reason: use, expectedHtu: check.url },
          "DPoP proof refused",
        );
      }
      // The client is told the current nonce and tries again; the refusal counts all the same,
      // as its proof's signature was checked. A full share is its client's own volume, not a
      // forgery.
      if (use === "nonce" && nonces !== undefined) {
        return {
          rule: "dpop_nonce",
          reply: nonceAnswer(challenges, variant, nonces.current(nowMs)),
          counts: true,
        };
      }
      return { rule: `dpop_${use}`, reply: answers[variant][use], counts: use !== "full" };
    },
  };
}
