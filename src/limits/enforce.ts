/**
 * Counts a request against a plan and decides. Every plan's counters are worked out once, when a
 * config snapshot is built (a quota's again at each period boundary); the request path hands the
 * store one batch, which takes the request's points for every limit or for none.
 */
import type { CounterStore, Slot } from "./counters.js";
import { decide, QUOTA_POLICY, type Decision } from "./decide.js";
import { policyField } from "./headers.js";
import type { LimitsSettings, Plan } from "./plans.js";
import { createPeriodClock, type PeriodSpan } from "./windows.js";

/** A plan with its counters at hand. */
export interface PreparedPlan {
  readonly plan: Plan;
  /** The counters a request at `nowMs` counts against: the rate limits, then the quota's period. */
  slots(nowMs: number): readonly Slot[];
  /** The plan's `RateLimit-Policy` value at `nowMs` (a monthly quota's window is its month's). */
  policy(nowMs: number): string;
}

/** The plans of one snapshot, ready for counting. */
export interface Enforcer {
  readonly anonymous: PreparedPlan | undefined;
  /** By client key; a client missing here is not limited unless its issuer has a plan. */
  readonly clients: ReadonlyMap<string, PreparedPlan>;
  /** A trusted issuer's plan for the clients `clients` does not list, by issuer name. */
  readonly issuers: ReadonlyMap<string, PreparedPlan>;
  /**
   * Counts `cost` points for `subject` (`client:<id>` or `ip:<address>`) and decides; at once
   * when the store counts synchronously (memory), else as a promise.
   */
  check(prepared: PreparedPlan, subject: string, cost: number): Decision | Promise<Decision>;
}

/** Prepares the counters of one plan. */
export function preparePlan(plan: Plan): PreparedPlan {
  const rateSlots = plan.rates.map((rule) => rule.slot);
  const policies = plan.rates.map((rule) => ({
    name: rule.name,
    limit: rule.limit,
    windowMs: rule.slot.ttlMs,
  }));
  const { quota } = plan;
  if (quota === undefined) {
    const fixed = Object.freeze(rateSlots);
    const policy = policyField(policies);
    return { plan, slots: () => fixed, policy: () => policy };
  }
  const periodAt = createPeriodClock(quota.period);
  let span: PeriodSpan | undefined;
  let slots: readonly Slot[] = [];
  let policy = "";
  const at = (nowMs: number): void => {
    const current = periodAt(nowMs);
    if (current === span) return;
    span = current;
    // A quota counter belongs to one calendar period: the next period starts from zero.
    const quotaSlot: Slot = {
      name: `${quota.counterName}@${current.id}`,
      limit: quota.limit,
      ttlMs: current.endMs - current.startMs,
      endsAt: current.endMs,
    };
    slots = Object.freeze([...rateSlots, quotaSlot]);
    policy = policyField([
      ...policies,
      { name: QUOTA_POLICY, limit: quota.limit, windowMs: quotaSlot.ttlMs },
    ]);
  };
  return {
    plan,
    slots(nowMs) {
      at(nowMs);
      return slots;
    },
    policy(nowMs) {
      at(nowMs);
      return policy;
    },
  };
}

/** Prepares every plan of `settings` against `store`; `now` is the clock windows follow. */
export function createEnforcer(
  settings: LimitsSettings,
  store: CounterStore,
  now: () => number,
): Enforcer {
  const prepared = new Map<Plan, PreparedPlan>();
  const prepare = (plan: Plan): PreparedPlan => {
    let entry = prepared.get(plan);
    if (entry === undefined) {
      entry = preparePlan(plan);
      prepared.set(plan, entry);
    }
    return entry;
  };
  const clients = new Map<string, PreparedPlan>();
  for (const [id, plan] of settings.clients) clients.set(id, prepare(plan));
  const issuers = new Map<string, PreparedPlan>();
  for (const [name, plan] of settings.issuers) issuers.set(name, prepare(plan));
  const { dryRun } = settings;

  return {
    anonymous: settings.anonymous === undefined ? undefined : prepare(settings.anonymous),
    clients,
    issuers,
    check(entry, subject, cost) {
      const nowMs = now();
      // A dry run counts every request, the ones it would refuse too.
      const counted = store.commit(subject, entry.slots(nowMs), cost, dryRun, nowMs);
      return counted instanceof Promise
        ? counted.then((settled) => decide(entry.plan, settled, cost, nowMs, dryRun))
        : decide(entry.plan, counted, cost, nowMs, dryRun);
    },
  };
}
