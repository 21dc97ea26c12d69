/**
 * The proof a DPoP-bound token comes with at the door (RFC 9449 §7.1): a proof of the key the
 * token is bound to, made for this request (its method, the URL the client used, this token's
 * hash), never seen before.
 */
import type { Reply, RequestContext } from "../core/context.js";
import { fieldLines } from "../http/field-lines.js";
import { invalidProofAnswers, nonceAnswer } from "./bearer-answers.js";
import {
  createProofVerifier,
  ProofRejected,
  type CheckedProof,
  type ProofRule,
} from "./dpop-proof.js";
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
export type DoorProofs = (
  ctx: RequestContext,
  accessToken: string,
  jkt: string,
  nowMs: number,
) => Promise<ProofOutcome>;

// `tokens.audience`'s origin when it is an http(s) URL: what the protected resource metadata
// publishes as the resource, and so the URL a client builds its requests on.
function audienceOrigin(audience: string): string | undefined {
  if (!URL.canParse(audience)) return undefined;
  const url = new URL(audience);
  return url.protocol === "https:" || url.protocol === "http:" ? url.origin : undefined;
}

/** The proof checks of `settings`, recording first uses in `marks`. */
export function createDoorProofs(
  settings: TokenSettings,
  marks: TokenMarks,
  challenges: Challenges,
): DoorProofs {
  const verifier = createProofVerifier(settings.dpop);
  const { nonces } = settings.dpop;
  const answers = invalidProofAnswers(challenges);
  const origin = audienceOrigin(settings.audience);

  return async (ctx, accessToken, jkt, nowMs) => {
    const variant = variantOf(ctx.route?.dpopRequired === true, true);
    // A nonce is no fault: the client is told the current one and tries again.
    const refusal = (rule: ProofRule, counts = true): ProofRefusal => ({
      rule: `dpop_${rule}`,
      reply: answers[variant][rule],
      counts,
    });
    const { req } = ctx;
    // RFC 9449 §4.3 item 1: exactly one DPoP field line (Node would join several into one).
    if (fieldLines(req.rawHeaders, "dpop") !== 1) return refusal("header");
    const check = {
      method: req.method as string,
      url: expectedHtu(origin, ctx, sentPath(ctx)),
      accessToken,
      jkt,
    };
    let proof: CheckedProof;
    try {
      proof = await verifier.verify(req.headers.dpop as string, check, nowMs);
    } catch (error) {
      if (!(error instanceof ProofRejected)) throw error;
      if (error.reason !== "nonce" || nonces === undefined) return refusal(error.reason);
      return {
        rule: "dpop_nonce",
        reply: nonceAnswer(challenges, variant, nonces.current(nowMs)),
        counts: false,
      };
    }
    // Held last, so only a proof that passed everything else is held.
    const use = await marks.firstProof(proof.jkt, proof.jti, proof.untilMs, nowMs);
    if (use === "first") return undefined;
    if (use === "unavailable") return "unavailable";
    return use === "replayed" ? refusal("replay") : refusal("full", false);
  };
}
