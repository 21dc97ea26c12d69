/**
 * Which limits are in force for a client, from its plan and its own overrides. Both the limits
 * module, which enforces them, and the configuration's checks, which refuse a route that they
 * could never let through, read them here.
 */

/** The UTC calendar periods a quota may count over. */
export const QUOTA_PERIODS = ["hour", "day", "month"] as const;

/** The name of a plan's or a client's single `rate_limit`. */
export const DEFAULT_RATE_NAME = "default";

/** What can set limits: a plan, or a client's own overrides. */
export interface LimitHolder {
  readonly rate_limit?: unknown;
  readonly rate_limits?: unknown;
  readonly quota?: unknown;
}

/** Where a client's limits in force come from: the holder of its rate limits and of its quota. */
export interface LimitsInForce<Holder> {
  /** The plan the client uses, when it exists. */
  readonly plan: string | undefined;
  readonly rates: Holder | undefined;
  readonly quota: Holder | undefined;
}

/**
 * The limits in force for a client (docs/limits.md): its plan is the one it names, else the plan
 * named `default` when there is one; its own `rate_limit(s)` replace the plan's whole set of rate
 * limits, its own `quota` the plan's quota. A client with neither a plan nor overrides is not
 * limited.
 */
export function limitsInForce<Holder extends LimitHolder>(
  client: Holder & { readonly plan?: unknown },
  plans: Readonly<Record<string, Holder>>,
): LimitsInForce<Holder> {
  const named = client.plan ?? "default";
  const plan = typeof named === "string" && Object.hasOwn(plans, named) ? named : undefined;
  const base = plan === undefined ? undefined : plans[plan];
  const ownRates = client.rate_limit !== undefined || client.rate_limits !== undefined;
  return {
    plan,
    rates: ownRates ? client : base,
    quota: client.quota !== undefined ? client : base,
  };
}
