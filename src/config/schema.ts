/**
 * The configuration file's one schema: it is the TypeScript type, the validation (unknown keys are
 * errors) and, through `z.toJSONSchema`, the published `config.schema.json`.
 * Checks sit on the smallest part they concern, so one bad section does not hide errors in another;
 * they are in schema-checks.ts, the value types in schema-fields.ts, the limits and plans in
 * limits-schema.ts, the upstream in upstream-schema.ts.
 */
import { z } from "zod";
import { crossChecks } from "./cross-checks.js";
import { ROUTE_METHODS } from "./route-methods.js";
import {
  LimitsSchema,
  PlanSchema,
  QuotaSchema,
  RateLimitSchema,
  RateLimitsSchema,
} from "./limits-schema.js";
import {
  checkClientSecret,
  checkLanguages,
  checkMethodsOnce,
  checkRoutePattern,
  checkRouteScopes,
  checkTokens,
  checkWebSocketRoute,
  oneRateForm,
  withinADay,
} from "./schema-checks.js";
import { TracingSchema } from "./tracing-schema.js";
import { UpstreamSchema } from "./upstream-schema.js";
import { TrustedIssuersSchema } from "./issuers-schema.js";
import { DpopSchema, dpopSetting } from "./dpop-schema.js";
import { checkTokenSources, originsSchema, tokenFromSchema } from "./token-from-schema.js";
import {
  cidr,
  duration,
  hostName,
  languageCode,
  listenAddress,
  ownPath,
  positiveDuration,
  positiveInt,
  resourceUri,
  scopeList,
} from "./schema-fields.js";

const ClientSchema = z
  .strictObject({
    id: z
      .string()
      .regex(/^[A-Za-z0-9._~-]{1,128}$/, {
        error: "must be 1 to 128 characters from A-Z a-z 0-9 . _ ~ -",
      })
      .describe("The client id used at the token endpoint."),
    secret_hash: z
      .string()
      .regex(/^scrypt\$/, {
        error: 'must be a value printed by "gatehouse hash-secret" (scrypt$...)',
      })
      .optional()
      .describe('The secret\'s hash, from "gatehouse hash-secret".'),
    secret_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
      .optional()
      .describe("The name of an environment variable holding the secret."),
    jwks_file: z
      .string()
      .min(1)
      .optional()
      .describe(
        "A JWKS file of the client's public keys, for private_key_jwt (RFC 7523) instead of a secret.",
      ),
    issuer: z
      .string()
      .optional()
      .describe("The trusted_issuers name whose tokens this client presents (then no secret)."),
    plan: z
      .string()
      .optional()
      .describe('The plan this client uses (default: the plan "default").'),
    rate_limit: RateLimitSchema.optional().describe("Replaces the plan's rate limits."),
    rate_limits: RateLimitsSchema.optional().describe("Replaces the plan's rate limits."),
    quota: QuotaSchema.optional().describe("Overrides the plan's quota."),
    scopes: scopeList(
      "The scopes this client may be granted; each listed in tokens.scopes.",
    ).default([]),
    default_scopes: scopeList(
      "Granted when a token request names no scope; default: all of scopes.",
    ).optional(),
    resources: z
      .array(resourceUri)
      .min(1, { error: "must list at least one resource" })
      .optional()
      .describe(
        "The resource values (RFC 8707) this client may request; default: [tokens.audience].",
      ),
    dpop: dpopSetting(
      "required: a token request needs a DPoP proof, so every token is bound (RFC 9449 §5.2).",
    ),
  })
  .superRefine(checkClientSecret)
  .superRefine(oneRateForm);

const RouteSchema = z
  .strictObject({
    path: z
      .string()
      .superRefine(checkRoutePattern)
      .describe("Exact path; a `*` segment matches one segment; a final `**` matches the subtree."),
    methods: z
      .array(z.enum(ROUTE_METHODS, { error: `must be one of ${ROUTE_METHODS.join(", ")}` }))
      .min(1, { error: "must list at least one method" })
      .describe(
        "Methods allowed on this route; another entry of the same path may allow others, not these.",
      ),
    cost: positiveInt("Points counted per request.").default(1),
    auth: z
      .enum(["bearer", "none"], { error: "must be bearer or none" })
      .default("bearer")
      .describe("bearer: a token is required; none: anonymous, limited by client IP."),
    scopes: scopeList("Every one of these scopes is needed (403 insufficient_scope otherwise).")
      .min(1, { error: "must list at least one scope" })
      .optional(),
    scopes_any: scopeList("One of these scopes is needed (403 insufficient_scope otherwise).")
      .min(1, { error: "must list at least one scope" })
      .optional(),
    dpop: dpopSetting(
      "required: only a DPoP-bound token with its proof passes; optional: a bound token needs its proof, a plain one passes.",
    ),
    websocket: z
      .boolean({ error: "must be true or false" })
      .default(false)
      .describe(
        "Pass WebSocket handshakes (RFC 6455) on to the upstream, then the frames both ways.",
      ),
    token_from: tokenFromSchema,
    origins: originsSchema,
  })
  .superRefine(checkMethodsOnce)
  .superRefine(checkRouteScopes)
  .superRefine(checkWebSocketRoute)
  .superRefine(checkTokenSources);

/** The whole configuration file, with every default applied. */
export const FileSchema = z
  .strictObject({
    listen: listenAddress("The public address.").default("0.0.0.0:8080"),
    admin_listen: listenAddress("The admin address serving /metrics.").default("127.0.0.1:9901"),
    admin_token_env: z
      .string()
      .regex(/^([A-Za-z_][A-Za-z0-9_]*)?$/, { error: "must be an environment variable name" })
      .default("")
      .describe(
        "A variable holding the admin token that /config and /limits need; /metrics and /version never do.",
      ),
    admin_hosts: z
      .array(hostName)
      .default([])
      .describe(
        "Names the admin listener answers to in Host, besides IP literals and localhost (any case, port ignored).",
      ),
    max_connections: positiveInt(
      "Open client connections on listen; at the cap the oldest idle one is closed for a new one.",
    ).default(1024),
    trusted_proxies: z
      .array(cidr)
      .default([])
      .describe("CIDRs whose X-Forwarded-For is believed (the rightmost untrusted hop wins)."),
    upstream: UpstreamSchema,
    tokens: z
      .strictObject({
        path: ownPath.default("/oauth/token").describe("The token endpoint's path."),
        issuer: z.string().min(1).default("gatehouse").describe("The tokens' iss claim."),
        audience: z
          .string()
          .min(1)
          .default("upstream")
          .describe("The tokens' aud claim when no resource is requested; bearer tokens need it."),
        scopes: scopeList(
          "Every scope gatehouse knows; clients and routes name only these.",
        ).default([]),
        ttl: positiveDuration("Token lifetime (expires_in).").default("1h"),
        clock_tolerance: duration(
          "Leeway for exp, nbf and iat checks; not for a DPoP proof's iat, which tokens.dpop.iat_window alone bounds.",
        ).default("30s"),
        assertion_max_lifetime: positiveDuration(
          "How far ahead of now a private_key_jwt client assertion's exp may be; a used jti is held until that exp.",
        )
          .refine(withinADay, {
            error: "must be at most 1d: a used assertion's jti is held until its exp",
          })
          .default("1h"),
        signing: z
          .strictObject({
            algorithm: z
              .enum(["EdDSA", "ES256", "HS256"], { error: "must be EdDSA, ES256 or HS256" })
              .default("EdDSA")
              .describe("The signing algorithm; verification is pinned to it."),
            key_file: z
              .string()
              .min(1)
              .optional()
              .describe("PKCS#8 PEM private key (EdDSA, ES256)."),
            secret_env: z
              .string()
              .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: "must be an environment variable name" })
              .optional()
              .describe("HS256: an environment variable holding a secret of at least 32 bytes."),
          })
          .prefault({}),
        previous_keys: z
          .array(z.string().min(1))
          .default([])
          .describe("Public key PEM files still accepted, for rotation."),
        verify_concurrency: positiveInt(
          "Client authentications checked at once (a secret's scrypt, an assertion's signature); default: the number of CPUs.",
        ).optional(),
        revocation_path: ownPath
          .default("/oauth/revoke")
          .describe("The revocation endpoint's path (RFC 7009)."),
        trusted_issuers: TrustedIssuersSchema,
        dpop: DpopSchema,
        failure_limit: RateLimitSchema.prefault({ limit: 10, window: "1m" }).describe(
          "Failed client authentications and refused bearer tokens per client IP (never per client id).",
        ),
      })
      .superRefine(checkTokens)
      .prefault({}),
    clients: z.array(ClientSchema).default([]).describe("The clients allowed to obtain tokens."),
    plans: z
      .record(z.string().regex(/^[A-Za-z0-9_-]+$/, { error: "must be a plan name" }), PlanSchema)
      .default({})
      .describe('Named limit plans; "anonymous" applies to auth: none routes.'),
    routes: z
      .array(RouteSchema)
      .default([])
      .describe(
        "The allowlist, matched by path, then by method: the first entry matching both wins. A path may be written in several entries with disjoint methods.",
      ),
    languages: z
      .strictObject({
        supported: z
          .array(languageCode)
          .min(1, { error: "must list at least one language" })
          .default(["en", "fr", "de", "es", "it"])
          .describe("Languages the upstream serves."),
        default: languageCode.default("en").describe("The language when nothing else matches."),
        translation: z
          .strictObject({
            parameter: z
              .string()
              .regex(/^[A-Za-z0-9_.-]+$/, { error: "must be a query parameter name" })
              .default("translation_language")
              .describe("The query parameter holding translation languages."),
            max: positiveInt("At most this many distinct codes are kept.").default(5),
            on_unsupported: z
              .enum(["reject", "drop"], { error: "must be reject or drop" })
              .default("reject")
              .describe("reject: 400; drop: remove the code."),
            forward_as: z
              .enum(["comma", "repeat"], { error: "must be comma or repeat" })
              .default("comma")
              .describe("comma: fr,de; repeat: one parameter per code."),
          })
          .prefault({}),
      })
      .superRefine(checkLanguages)
      .prefault({}),
    limits: LimitsSchema.prefault({}),
    health: z
      .strictObject({
        liveness_path: ownPath.default("/healthz").describe("200 while the process runs."),
        readiness_path: ownPath
          .default("/readyz")
          .describe(
            "200 when serving; 503 while draining, or while Redis is down under on_outage: closed.",
          ),
      })
      .prefault({}),
    shutdown: z
      .strictObject({
        delay: duration("After SIGTERM, keep accepting this long while /readyz says 503.").default(
          "0s",
        ),
        grace: duration("Then in-flight requests get this long to finish.").default("25s"),
      })
      .prefault({}),
    logging: z
      .strictObject({
        level: z
          .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
            error: "must be fatal, error, warn, info, debug, trace or silent",
          })
          .default("info")
          .describe("The log level."),
      })
      .prefault({}),
    tracing: TracingSchema.prefault({}),
  })
  // Always: a reference between sections is worth reporting whatever else is wrong.
  .superRefine(crossChecks, { when: () => true });

/** The configuration file as validated, with defaults applied. */
export type FileConfig = z.output<typeof FileSchema>;
/** One route entry of the file. */
export type RouteConfig = FileConfig["routes"][number];
/** One client entry of the file. */
export type ClientConfig = FileConfig["clients"][number];
/** One plan of the file. */
export type PlanConfig = FileConfig["plans"][string];
/** A rate limit of the file. */
export type RateLimitConfig = z.output<typeof RateLimitSchema>;
/** A quota of the file. */
export type QuotaConfig = z.output<typeof QuotaSchema>;
