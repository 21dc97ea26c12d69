/**
 * `tokens.trusted_issuers`: identity providers whose access tokens gatehouse accepts as their
 * resource server, each with the keys' location, the audiences, the claim naming the client,
 * the algorithms its tokens may be signed with and the plan for clients the file does not list.
 */
import { z } from "zod";
import { problem, type Ctx } from "./cross-checks.js";
import { secureUrl } from "../http/secure-url.js";

/**
 * The asymmetric JWS algorithms a provider's tokens may use (RFC 7518 §3.1, RFC 8037). `none`
 * and the HMAC ones are not among them: a provider's HMAC key would be a secret gatehouse does
 * not hold, and RFC 8725 §2.1 key confusion signs HS256 with a public key.
 */
export const PROVIDER_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
] as const;

/** A provider's name: in logs, metrics labels, counter keys and `<name>:<client id>`. */
export const ISSUER_NAME = /^[a-z0-9-]{1,32}$/;

/** The name upstream and logs read for gatehouse's own tokens; no provider may take it. */
export const OWN_ISSUER_NAME = "own";

function checkSecureUrl(value: string, ctx: Ctx, example: string): void {
  if (secureUrl(value) === undefined) {
    problem(
      ctx,
      [],
      `must be an https URL without query, fragment or userinfo (http only on a loopback host), such as ${example}`,
    );
  }
}

const TrustedIssuerSchema = z.strictObject({
  name: z
    .string()
    .regex(ISSUER_NAME, { error: "must be 1 to 32 characters from a-z 0-9 -" })
    .refine((name) => name !== OWN_ISSUER_NAME, {
      error: `is reserved for gatehouse's own tokens; choose another name`,
    })
    .describe("The provider's name in logs, metrics, counter keys and <name>:<client id>."),
  issuer: z
    .string()
    .superRefine((value, ctx) => checkSecureUrl(value, ctx, "https://idp.example.com/realms/corp"))
    .describe("The tokens' iss, compared exactly; its metadata is discovered from it."),
  jwks_uri: z
    .string()
    .superRefine((value, ctx) => {
      if (value !== "") checkSecureUrl(value, ctx, "https://idp.example.com/certs");
    })
    .default("")
    .describe('The provider\'s JWKS; "" discovers it (RFC 8414, then OpenID Connect Discovery).'),
  audiences: z
    // Not only URIs: Keycloak writes the client id of the API (`account`) in `aud`.
    .array(z.string().min(1, { error: "must not be empty" }))
    .min(1, { error: "must list at least one audience" })
    .optional()
    .describe("A token's aud must hold one of these; default: [tokens.audience]."),
  client_claim: z
    .string()
    .min(1)
    .optional()
    .describe("The claim naming the client; default: client_id, else azp."),
  algorithms: z
    .array(
      z.enum(PROVIDER_ALGORITHMS, {
        error: `must be one of ${PROVIDER_ALGORITHMS.join(", ")} (none and HS* are never accepted from a provider)`,
      }),
    )
    .min(1, { error: "must list at least one algorithm" })
    .default(["RS256", "PS256", "ES256", "EdDSA"])
    .describe("The algorithms its tokens may be signed with."),
  plan: z
    .string()
    .optional()
    .describe("The plan of its clients that clients does not list; without it they are refused."),
});

/** `tokens.trusted_issuers`; names and issuers are checked for repeats with the other sections. */
export const TrustedIssuersSchema = z
  .array(TrustedIssuerSchema)
  .default([])
  .describe("Identity providers whose access tokens are accepted (gatehouse as resource server).");

/** One trusted issuer of the file. */
export type TrustedIssuerConfig = z.output<typeof TrustedIssuersSchema>[number];
