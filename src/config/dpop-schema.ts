/**
 * `tokens.dpop`: how DPoP proofs (RFC 9449) are checked, at the token endpoint and at the door,
 * and the `dpop` setting a client or a route has.
 */
import { z } from "zod";
import { PROVIDER_ALGORITHMS } from "./issuers-schema.js";

/**
 * The asymmetric algorithms a proof may use: the providers' ones, and Ed25519 (RFC 9864's
 * fully-specified name for EdDSA over Ed25519), which oauth4webapi and openid-client sign with
 * for an Ed25519 key.
 */
export const PROOF_ALGORITHMS = [...PROVIDER_ALGORITHMS, "Ed25519"] as const;
import { positiveDuration } from "./schema-fields.js";
import { withinADay } from "./schema-checks.js";

/** What a client or a route asks of DPoP: `required` refuses a request without a proof. */
export const dpopSetting = (description: string) =>
  z
    .enum(["optional", "required"], { error: "must be optional or required" })
    .default("optional")
    .describe(description);

/** `tokens.dpop`. */
export const DpopSchema = z
  .strictObject({
    algorithms: z
      .array(
        z.enum(PROOF_ALGORITHMS, {
          error: `must be one of ${PROOF_ALGORITHMS.join(", ")} (a proof is signed with a key only the client holds: never none or HS*)`,
        }),
      )
      .min(1, { error: "must list at least one algorithm" })
      .default(["ES256", "EdDSA", "Ed25519", "PS256", "RS256"])
      .describe(
        "The algorithms a DPoP proof may be signed with (dpop_signing_alg_values_supported).",
      ),
    iat_window: positiveDuration(
      "How far a proof's iat may lie from now, behind or ahead; clock_tolerance does not widen it. A used proof's jti is held until its iat plus this.",
    )
      .refine(withinADay, { error: "must be at most 1d: a used proof's jti is held that long" })
      .default("300s"),
    nonce: z
      .boolean({ error: "must be true or false" })
      .default(false)
      .describe("Require a server-provided nonce in every proof (RFC 9449 §8 and §9)."),
    nonce_secret_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
      .optional()
      .describe(
        "A variable holding the secret nonces are made with (at least 32 bytes); default: derived from the signing key.",
      ),
  })
  .prefault({});
