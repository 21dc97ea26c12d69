/**
 * Counts a request against a plan and decides. Every plan's limiters are looked up once, when a
 * config snapshot is built; the request path only adds points and, for a 429, takes them back.
 */
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import { decide, type Decision } from "./decide.js";
import type { LimitsSettings, Plan, QuotaRule, RateRule } from "./plans.js";
import { addPoints, refundPoints, type LimiterStore } from "./store.js";
import { createPeriodClock, type PeriodSpan } from "./windows.js";

/** A plan with its counters at hand. */
export interface PreparedPlan {
  readonly plan: Plan;
  readonly rate: { readonly rule: RateRule; readonly limiter: RateLimiterAbstract } | undefined;
  readonly quota:
    | {
        readonly rule: QuotaRule;
        readonly limiter: RateLimiterAbstract;
        readonly periodAt: (nowMs: number) => PeriodSpan;
      }
    | undefined;
}

/** The plans of one snapshot, ready for counting. */
export interface Enforcer {
  readonly anonymous: PreparedPlan | undefined;
  /** By client id; a client missing here is not limited. */
  readonly clients: ReadonlyMap<string, PreparedPlan>;
  /** Counts `cost` points for `key` (`client:<id>` or `ip:<address>`) and decides. */
  check(prepared: PreparedPlan, key: string, cost: number): Promise<Decision>;
}

/** Prepares every plan of `settings` against `store`; `now` is the clock quotas follow. */
export function createEnforcer(
  settings: LimitsSettings,
  store: LimiterStore,
  now: () => number,
): Enforcer {
  const prepared = new Map<Plan, PreparedPlan>();
  const prepare = (plan: Plan): PreparedPlan => {
    let entry = prepared.get(plan);
    if (entry === undefined) {
      const { rate, quota } = plan;
      entry = {
        plan,
        rate: rate === undefined ? undefined : { rule: rate, limiter: store.limiter(rate.counter) },
        quota:
          quota === undefined
            ? undefined
            : {
                rule: quota,
                limiter: store.limiter(quota.counter),
                periodAt: createPeriodClock(quota.period),
              },
      };
      prepared.set(plan, entry);
    }
    return entry;
  };
  const clients = new Map<string, PreparedPlan>();
  for (const [id, plan] of settings.clients) clients.set(id, prepare(plan));

  return {
    anonymous: settings.anonymous === undefined ? undefined : prepare(settings.anonymous),
    clients,
    async check({ rate, quota }, key, cost) {
      const nowMs = now();
      const [rateInput, quotaInput] = await Promise.all([
        rate && countRate(rate, key, cost),
        quota && countQuota(quota, key, cost, nowMs),
      ]);
      const decision = decide({
        rate: rateInput,
        quota: quotaInput,
        cost,
        nowMs,
        dryRun: settings.dryRun,
      });
      if (!decision.allowed) {
        // SPEC §6: a request answered 429 consumes nothing, neither rate nor quota.
        await Promise.all([
          rate && refundPoints(rate.limiter, key, cost),
          quota && quotaInput && refundPoints(quota.limiter, quotaInput.key, cost),
        ]);
      }
      return decision;
    },
  };
}

// Counts against the rate limit's window, which starts at the key's first request (RLF).
async function countRate(rate: NonNullable<PreparedPlan["rate"]>, key: string, cost: number) {
  return { rule: rate.rule, count: await addPoints(rate.limiter, key, cost) };
}

// Counts against the counter of the calendar period `nowMs` falls in.
async function countQuota(
  quota: NonNullable<PreparedPlan["quota"]>,
  key: string,
  cost: number,
  nowMs: number,
) {
  const span = quota.periodAt(nowMs);
  // A quota counter belongs to one calendar period: the next period starts from zero.
  const periodKey = `${key}@${span.id}`;
  const lifetimeSec = Math.ceil((span.endMs - nowMs) / 1000);
  const count = await addPoints(quota.limiter, periodKey, cost, lifetimeSec);
  return { rule: quota.rule, count, endMs: span.endMs, key: periodKey };
}
