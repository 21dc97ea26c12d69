/**
 * The configuration file's one schema: it is the TypeScript type, the validation (unknown keys are
 * errors) and, through `z.toJSONSchema`, the published `config.schema.json`.
 * Checks sit on the smallest part they concern, so one bad section does not hide errors in another.
 */
import { isIP } from "node:net";
import { z } from "zod";
import { crossChecks, problem, type Ctx } from "./cross-checks.js";
import { DURATION_PATTERN, durationMs, POSITIVE_DURATION_PATTERN } from "./duration.js";
import { redisSchema } from "./redis-schema.js";

const duration = (description: string) =>
  z
    .string({ error: "must be a duration such as 500ms, 30s, 1m, 1h or 1d" })
    .regex(new RegExp(DURATION_PATTERN), {
      error: "must be a duration such as 500ms, 30s, 1m, 1h or 1d (a whole number and a unit)",
    })
    .describe(description);

const positiveDuration = (description: string) =>
  z
    .string({ error: "must be a duration such as 500ms, 30s, 1m, 1h or 1d" })
    .regex(new RegExp(POSITIVE_DURATION_PATTERN), {
      error: "must be a duration greater than zero, such as 500ms, 30s, 1m, 1h or 1d",
    })
    .describe(description);

const LONGEST_WINDOW_MS = 366 * 86_400_000;

// Only a well-formed duration is measured; the pattern reports the others.
function withinAYear(text: string): boolean {
  return !new RegExp(DURATION_PATTERN).test(text) || durationMs(text) <= LONGEST_WINDOW_MS;
}

const positiveInt = (description: string) =>
  z
    .number({ error: "must be a whole number" })
    .int({ error: "must be a whole number" })
    .min(1, { error: "must be at least 1" })
    .max(Number.MAX_SAFE_INTEGER, { error: "is too large" })
    .describe(description);

const LISTEN_PATTERN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/;

const listenAddress = (description: string) =>
  z
    .string({ error: "must be HOST:PORT, such as 0.0.0.0:8080 or [::]:8080" })
    .refine((v) => LISTEN_PATTERN.test(v) && Number(LISTEN_PATTERN.exec(v)?.[2]) <= 65535, {
      error: "must be HOST:PORT with a port from 0 to 65535, such as 0.0.0.0:8080 or [::]:8080",
    })
    .describe(description);

const cidr = z.string().refine(
  (v) => {
    const [address, bits, extra] = v.split("/");
    const family = isIP(address ?? "");
    if (family === 0 || extra !== undefined) return false;
    if (bits === undefined) return true;
    if (!/^[0-9]{1,3}$/.test(bits)) return false;
    return Number(bits) <= (family === 4 ? 32 : 128);
  },
  { error: "must be an IP address or a CIDR block, such as 10.0.0.0/8 or fd00::/8" },
);

// RFC 9110 §5.1: a field name is a token.
const headerName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, {
  error: "must be an HTTP header name, such as X-Client-Id",
});

const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

const languageCode = z.string().regex(/^[a-z]{2,3}$/, {
  error: "must be a two- or three-letter lower-case language code, such as fr",
});

function absoluteUrl(value: string, ctx: Ctx, example: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    problem(ctx, [], `must be an absolute URL, such as ${example}`);
    return undefined;
  }
}

function noQuery(url: URL, ctx: Ctx): void {
  if (url.search !== "" || url.hash !== "") {
    problem(ctx, [], "must not contain a query or a fragment");
  }
}

function checkUpstreamUrl(value: string, ctx: Ctx): void {
  const url = absoluteUrl(value, ctx, "http://127.0.0.1:3000");
  if (url === undefined) return;
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    problem(ctx, [], `must use http or https, not ${url.protocol.slice(0, -1)}`);
  }
  if (url.username !== "" || url.password !== "") {
    problem(ctx, [], "must not contain a user name or password");
  }
  noQuery(url, ctx);
}

/** Why a literal path (no wildcards) is unusable, or undefined when it is fine. */
function literalPathProblem(path: string): string | undefined {
  if (!path.startsWith("/")) return 'must start with "/"';
  const segments = path.slice(1).split("/");
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as string;
    if (segment === "" && i < segments.length - 1)
      return 'must not contain an empty segment ("//")';
    if (segment === "." || segment === "..") return 'must not contain "." or ".." segments';
    if (!/^([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*$/.test(segment)) {
      return `has a character that is not allowed in a path segment: ${JSON.stringify(segment)}`;
    }
    if (/%(2f|5c|00)/i.test(segment)) return "must not contain %2F, %5C or %00";
    if (segment.includes(";")) return 'must not contain ";" (matrix parameters)';
  }
  return undefined;
}

const ownPath = z.string().superRefine((value, ctx) => {
  const reason = literalPathProblem(value);
  if (reason !== undefined) problem(ctx, [], reason);
});

function checkRoutePattern(pattern: string, ctx: Ctx): void {
  const segments = pattern.startsWith("/") ? pattern.slice(1).split("/") : [];
  const reason = literalPathProblem(pattern.replace(/\/\*\*?(?=\/|$)/g, "/x"));
  if (reason !== undefined) {
    problem(ctx, [], reason);
  } else if (segments.some((s) => s.includes("*") && s !== "*" && s !== "**")) {
    problem(ctx, [], '"*" and "**" must be whole path segments, such as /v1/items/*');
  } else if (segments.slice(0, -1).includes("**")) {
    problem(ctx, [], '"**" may only be the last segment, such as /v1/reports/**');
  }
}

function checkMethodsOnce(route: { methods: readonly string[] }, ctx: Ctx): void {
  const seen = new Set<string>();
  route.methods.forEach((method, m) => {
    if (seen.has(method)) problem(ctx, ["methods", m], "is listed twice");
    seen.add(method);
  });
}

function checkDuplicateRoutes(routes: ReadonlyArray<{ path: string }>, ctx: Ctx): void {
  const seen = new Map<string, number>();
  routes.forEach((route, index) => {
    const first = seen.get(route.path);
    if (first !== undefined) {
      problem(
        ctx,
        [index, "path"],
        `duplicates routes[${first}]; merge their methods into one entry`,
      );
    } else {
      seen.set(route.path, index);
    }
  });
}

function checkClientSecret(client: { secret_hash?: string; secret_env?: string }, ctx: Ctx): void {
  const secrets =
    Number(client.secret_hash !== undefined) + Number(client.secret_env !== undefined);
  if (secrets === 0)
    problem(ctx, [], "needs secret_hash (from gatehouse hash-secret) or secret_env");
  if (secrets === 2) problem(ctx, [], "must have either secret_hash or secret_env, not both");
}

interface TokensShape {
  signing: { algorithm: string; key_file?: string | undefined; secret_env?: string | undefined };
  previous_keys: readonly string[];
}

function checkTokens(tokens: TokensShape, ctx: Ctx): void {
  const { signing } = tokens;
  if (signing.algorithm === "HS256") {
    if (signing.key_file !== undefined) {
      problem(ctx, ["signing", "key_file"], "is for EdDSA and ES256; HS256 uses secret_env");
    }
    if (tokens.previous_keys.length > 0) {
      problem(ctx, ["previous_keys"], "are public keys for EdDSA and ES256, not HS256");
    }
  } else if (signing.secret_env !== undefined) {
    problem(
      ctx,
      ["signing", "secret_env"],
      `is for HS256; ${signing.algorithm} uses key_file (a PKCS#8 PEM from gatehouse keygen)`,
    );
  }
}

interface LanguagesShape {
  supported: readonly string[];
  default: string;
}

function checkLanguages(languages: LanguagesShape, ctx: Ctx): void {
  const { supported } = languages;
  if (!supported.includes(languages.default)) {
    problem(ctx, ["default"], `must be one of the supported languages (${supported.join(", ")})`);
  }
  const seen = new Set<string>();
  supported.forEach((code, index) => {
    if (seen.has(code)) problem(ctx, ["supported", index], "is listed twice");
    seen.add(code);
  });
}

/** A rate limit: `limit` points per fixed `window`, which starts at the key's first counted request. */
export const RateLimitSchema = z
  .strictObject({
    limit: positiveInt("Points allowed per window."),
    window: positiveDuration("The window's length.").refine(withinAYear, {
      error: "must be at most 366d",
    }),
  })
  .describe("A rate limit, reported in X-RateLimit-* headers.");

/** A quota: `limit` points per UTC calendar `period`. */
export const QuotaSchema = z
  .strictObject({
    limit: positiveInt("Points allowed per period."),
    period: z
      .enum(["hour", "day", "month"], { error: "must be hour, day or month" })
      .describe("The UTC calendar period the quota resets at."),
  })
  .describe("A quota, reported in X-Request-Quota-* headers.");

/** Several named rate limits, all enforced; `quota` is the quota's name among them. */
export const RateLimitsSchema = z
  .record(
    z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,32}$/, { error: "must be 1 to 32 characters from A-Z a-z 0-9 _ -" })
      .refine((name) => name !== "quota", { error: '"quota" is the quota\'s name' }),
    RateLimitSchema,
  )
  .refine((limits) => Object.keys(limits).length > 0, { error: "must name at least one limit" })
  .describe("Named rate limits, all enforced (for example burst and sustained).");

// A plan or a client override has the one-limit form or the named form, not both.
function oneRateForm(
  limits: { rate_limit?: unknown; rate_limits?: unknown },
  ctx: z.RefinementCtx,
): void {
  if (limits.rate_limit !== undefined && limits.rate_limits !== undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["rate_limits"],
      message: "has both rate_limit and rate_limits; keep one",
    });
  }
}

const PlanSchema = z
  .strictObject({
    rate_limit: RateLimitSchema.optional(),
    rate_limits: RateLimitsSchema.optional(),
    quota: QuotaSchema.optional(),
  })
  .superRefine(oneRateForm)
  .refine(
    (plan) =>
      plan.rate_limit !== undefined || plan.rate_limits !== undefined || plan.quota !== undefined,
    { error: "needs rate_limit (or rate_limits), quota or both" },
  );

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
    plan: z
      .string()
      .optional()
      .describe('The plan this client uses (default: the plan "default").'),
    rate_limit: RateLimitSchema.optional().describe("Replaces the plan's rate limits."),
    rate_limits: RateLimitsSchema.optional().describe("Replaces the plan's rate limits."),
    quota: QuotaSchema.optional().describe("Overrides the plan's quota."),
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
      .array(z.enum(METHODS, { error: `must be one of ${METHODS.join(", ")}` }))
      .min(1, { error: "must list at least one method" })
      .describe("Methods allowed on this route."),
    cost: positiveInt("Points counted per request.").default(1),
    auth: z
      .enum(["bearer", "none"], { error: "must be bearer or none" })
      .default("bearer")
      .describe("bearer: a token is required; none: anonymous, limited by client IP."),
  })
  .superRefine(checkMethodsOnce);

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
        "A variable holding the admin API's bearer token; every request but /metrics needs it.",
      ),
    max_connections: positiveInt(
      "Open client connections on listen; at the cap the oldest idle one is closed for a new one.",
    ).default(1024),
    trusted_proxies: z
      .array(cidr)
      .default([])
      .describe("CIDRs whose X-Forwarded-For is believed (the rightmost untrusted hop wins)."),
    upstream: z.strictObject(
      {
        url: z
          .string({
            error: (issue) =>
              issue.input === undefined
                ? "is required: the upstream's base URL, such as http://127.0.0.1:3000"
                : "must be a URL string, such as http://127.0.0.1:3000",
          })
          .superRefine(checkUpstreamUrl)
          .describe("The upstream's base URL (http or https, no userinfo)."),
        timeout: positiveDuration("No response headers in this time: 504.").default("30s"),
        max_sockets: positiveInt("Keep-alive pool size to the upstream.").default(256),
        idle_timeout: positiveDuration(
          "A pooled connection idle this long is closed; keep it below the upstream's own.",
        ).default("4s"),
        identity_header: headerName
          .default("X-Client-Id")
          .describe("Set to the authenticated client id; inbound copies are removed."),
        forward_authorization: z
          .boolean({ error: "must be true or false" })
          .default(false)
          .describe("Pass the bearer token on to the upstream."),
      },
      {
        error: (issue) =>
          issue.input === undefined
            ? "is required, with at least url: the service gatehouse protects"
            : "must be a mapping with at least url",
      },
    ),
    tokens: z
      .strictObject({
        path: ownPath.default("/oauth/token").describe("The token endpoint's path."),
        issuer: z.string().min(1).default("gatehouse").describe("The tokens' iss claim."),
        audience: z.string().min(1).default("upstream").describe("The tokens' aud claim."),
        ttl: positiveDuration("Token lifetime (expires_in).").default("1h"),
        clock_tolerance: duration("Leeway for exp, nbf and iat checks.").default("30s"),
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
        failure_limit: RateLimitSchema.prefault({ limit: 10, window: "1m" }).describe(
          "Failed client authentications per client IP and per client id; refused bearer tokens per client IP.",
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
      .superRefine(checkDuplicateRoutes)
      .default([])
      .describe("The allowlist; the first match wins."),
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
    limits: z
      .strictObject({
        store: z
          .enum(["memory", "redis"], { error: "must be memory or redis" })
          .default("memory")
          .describe("Where counters live."),
        redis: redisSchema(
          positiveDuration("A slower Redis answer counts as an outage.").default("100ms"),
        ).prefault({}),
        state_file: z
          .string()
          .default("")
          .describe("Memory store: counters are saved here on shutdown and read at start."),
        reset_header: z
          .enum(["seconds", "unix"], { error: "must be seconds or unix" })
          .default("seconds")
          .describe("X-RateLimit-Reset as seconds until reset, or epoch seconds."),
        dry_run: z
          .boolean({ error: "must be true or false" })
          .default(false)
          .describe("Count and send headers, but never refuse."),
        headers: z
          .array(z.enum(["x-ratelimit", "ietf"], { error: "must be x-ratelimit or ietf" }))
          .min(1, { error: "must list x-ratelimit, ietf or both" })
          .default(["x-ratelimit"])
          .describe(
            "x-ratelimit: X-RateLimit-* and X-Request-Quota-*; ietf: RateLimit and RateLimit-Policy.",
          ),
      })
      .refine((limits) => limits.store !== "redis" || limits.state_file === "", {
        path: ["state_file"],
        error: "is for the memory store; Redis keeps its own counters",
      })
      .prefault({}),
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
