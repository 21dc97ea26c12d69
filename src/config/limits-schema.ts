/**
 * The schema of limits: a rate limit, a quota, the named plans that combine them, and the
 * `limits` section saying where counters live and how they are reported. Kept apart from the rest
 * of the schema, as the `limits.redis` section is in redis-schema.ts.
 */
import { z } from "zod";
import { QUOTA_PERIODS } from "./limits-in-force.js";
import { redisSchema } from "./redis-schema.js";
import { oneRateForm, withinAYear } from "./schema-checks.js";
import { positiveDuration, positiveInt } from "./schema-fields.js";

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
      .enum(QUOTA_PERIODS, { error: "must be hour, day or month" })
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

/** A named plan: its rate limits, its quota or both. */
export const PlanSchema = z
  .strictObject({
    rate_limit: RateLimitSchema.optional(),
    rate_limits: RateLimitsSchema.optional(),
    quota: QuotaSchema.optional(),
    connections: positiveInt(
      "Open WebSocket connections per client at once, across the replicas sharing the store; the anonymous plan's is 16 per client address when not set.",
    ).optional(),
  })
  .superRefine(oneRateForm)
  .refine(
    (plan) =>
      plan.rate_limit !== undefined || plan.rate_limits !== undefined || plan.quota !== undefined,
    { error: "needs rate_limit (or rate_limits), quota or both" },
  );

/** The `limits` section: the counters' store, and how limits are reported and enforced. */
export const LimitsSchema = z.strictObject({
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
    .describe(
      "Memory store: counters, revoked token ids and used assertion ids are saved here on shutdown and read at start.",
    ),
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
});
