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
  /**
   * Counts `cost` points for `key` (`client:<id>` or `ip:<address>`) and decides; at once when
   * the store counts synchronously (memory), else as a promise.
   */
  check(prepared: PreparedPlan, key: string, cost: number): Decision | Promise<Decision>;
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
    check({ rate, quota }, key, cost) {
      const nowMs = now();
      const rateCount = rate && addPoints(rate.limiter, key, cost);
      let quotaCount: QuotaCount | Promise<QuotaCount> | undefined;
      if (quota !== undefined) {
        const span = quota.periodAt(nowMs);
        // A quota counter belongs to one calendar period: the next period starts from zero.
        const periodKey = `${key}@${span.id}`;
        const lifetimeSec = Math.ceil((span.endMs - nowMs) / 1000);
        const counted = addPoints(quota.limiter, periodKey, cost, lifetimeSec);
        quotaCount =
          counted instanceof Promise
            ? counted.then((count) => ({ count, span, periodKey }))
            : { count: counted, span, periodKey };
      }
      const settle = (rateNow: Count | undefined, quotaNow: QuotaCount | undefined) => {
        const decision = decide({
          rate: rate && rateNow && { rule: rate.rule, count: rateNow },
          quota: quota &&
            quotaNow && { rule: quota.rule, count: quotaNow.count, endMs: quotaNow.span.endMs },
          cost,
          nowMs,
          dryRun: settings.dryRun,
        });
        if (decision.allowed) return decision;
        // SPEC §6: a request answered 429 consumes nothing, neither rate nor quota.
        const refunds = [
          rate && refundPoints(rate.limiter, key, cost),
          quota && quotaNow && refundPoints(quota.limiter, quotaNow.periodKey, cost),
        ].filter((refund) => refund instanceof Promise);
        // A refund that fails (Redis went away meanwhile) leaves the points counted: the client
        // is held to a little less, and the request is still refused, never forwarded.
        return refunds.length === 0
          ? decision
          : Promise.all(refunds.map((refund) => refund.catch(() => undefined))).then(
              () => decision,
            );
      };
      // The memory store counts synchronously, and then so does the decision.
      if (rateCount instanceof Promise || quotaCount instanceof Promise) {
        return Promise.all([rateCount, quotaCount]).then(([r, q]) => settle(r, q));
      }
      return settle(rateCount, quotaCount);
    },
  };
}

/** A quota count with the period it was counted in and the key it was counted under. */
interface QuotaCount {
  readonly count: Count;
  readonly span: PeriodSpan;
  readonly periodKey: string;
}
