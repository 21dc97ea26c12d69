/**
 * Counts a request against a plan and decides. Every plan's counters are worked out once, when a
 * config snapshot is built (a quota's again at each period boundary); the request path hands the
 * store one batch, which takes the request's points for every limit or for none.
 */
import type { CounterStore, Slot } from "./counters.js";
import { decide, type Decision } from "./decide.js";
import type { LimitsSettings, Plan } from "./plans.js";
import { createPeriodClock, type PeriodSpan } from "./windows.js";

/** A plan with its counters at hand. */
export interface PreparedPlan {
  readonly plan: Plan;
  /** The counters a request at `nowMs` counts against: the rate limits, then the quota's period. */
  slots(nowMs: number): readonly Slot[];
}

/** The plans of one snapshot, ready for counting. */
export interface Enforcer {
  readonly anonymous: PreparedPlan | undefined;
  /** By client id; a client missing here is not limited. */
  readonly clients: ReadonlyMap<string, PreparedPlan>;
  /**
   * Counts `cost` points for `subject` (`client:<id>` or `ip:<address>`) and decides; at once
   * when the store counts synchronously (memory), else as a promise.
   */
  check(prepared: PreparedPlan, subject: string, cost: number): Decision | Promise<Decision>;
}

/** Prepares the counters of one plan. */
export function preparePlan(plan: Plan): PreparedPlan {
  const rateSlots = plan.rates.map((rule) => rule.slot);
  const { quota } = plan;
  if (quota === undefined) {
    const fixed = Object.freeze(rateSlots);
    return { plan, slots: () => fixed };
  }
  const periodAt = createPeriodClock(quota.period);
  let span: PeriodSpan | undefined;
  let slots: readonly Slot[] = [];
  return {
    plan,
    slots(nowMs) {
      const current = periodAt(nowMs);
      if (current !== span) {
        span = current;
        // A quota counter belongs to one calendar period: the next period starts from zero.
        const quotaSlot: Slot = {
          name: `${quota.counterName}@${current.id}`,
          limit: quota.limit,
          ttlMs: current.endMs - current.startMs,
          endsAt: current.endMs,
        };
        slots = Object.freeze([...rateSlots, quotaSlot]);
      }
      return slots;
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
  const { dryRun } = settings;

  return {
    anonymous: settings.anonymous === undefined ? undefined : prepare(settings.anonymous),
    clients,
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
