/**
 * Counts a request against a plan and decides. Every plan's limiters are looked up once, when a
 * config snapshot is built; the request path only adds points and, for a 429, takes them back.
 */
import type { RateLimiterAbstract } from "rate-limiter-flexible";
import { decide, type Decision } from "./decide.js";
import type { LimitsSettings, Plan, QuotaRule, RateRule } from "./plans.js";
import { addPoints, refundPoints, type Count, type LimiterStore } from "./store.js";
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
      const span = quota?.periodAt(nowMs);
      // A quota counter belongs to one calendar period: the next period starts from zero.
      const quotaKey = span === undefined ? "" : `${key}@${span.id}`;
      const [rateCount, quotaCount] = await Promise.all([
        rate === undefined ? undefined : addPoints(rate.limiter, key, cost),
        quota === undefined || span === undefined
          ? undefined
          : addPoints(quota.limiter, quotaKey, cost, Math.ceil((span.endMs - nowMs) / 1000)),
      ]);
      const decision = decide({
        rate: rate === undefined ? undefined : { rule: rate.rule, count: rateCount as Count },
        quota:
          quota === undefined || span === undefined
            ? undefined
            : { rule: quota.rule, count: quotaCount as Count, endMs: span.endMs },
        cost,
        nowMs,
        dryRun: settings.dryRun,
      });
      if (!decision.allowed) {
        // SPEC §6: a request answered 429 consumes nothing, neither rate nor quota.
        await Promise.all([
          rate === undefined ? undefined : refundPoints(rate.limiter, key, cost),
          quota === undefined ? undefined : refundPoints(quota.limiter, quotaKey, cost),
        ]);
      }
      return decision;
    },
  };
}
