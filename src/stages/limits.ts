import { addressKey } from "../limits/client-key.js";
import type { Decision } from "../limits/decide.js";
import { createEnforcer, type PreparedPlan } from "../limits/enforce.js";
import { renderDecision, tooManyRequests, type HeaderStyle } from "../limits/headers.js";
import { clientPlan, type LimitsSettings } from "../limits/plans.js";
import type { CounterStore } from "../limits/counters.js";
import { createOutage } from "../limits/outage.js";
import {
  errorReply,
  type Outcome,
  type Reply,
  type RequestContext,
  type Stage,
  type Upgrade,
} from "../core/context.js";
import type { Services } from "../core/services.js";

// A Redis outage under `on_outage: closed`: 503, never a 429, which would blame the client.
const LIMITS_UNAVAILABLE = errorReply(
  503,
  "limits_unavailable",
  "the rate limiter cannot be reached; try again shortly",
  { "retry-after": "1" },
);

// Over `connections`: no window ends it, a connection closing does; a second is a short wait.
function tooManyConnections(most: number): Reply {
  return tooManyRequests(
    "rate_limited",
    `the client holds its ${most} open WebSocket connections; close one first`,
    1,
    most,
    "open at once",
    "connections",
  );
}

/**
 * A WebSocket handshake let through takes one of its client's `connections` slots, held until its
 * connection ends (core/entry.ts gives it back); none left: 429 with `policy: connections`.
 */
function connectionSlots(
  store: CounterStore,
  services: Services,
  dryRun: boolean,
  unavailable: (ctx: RequestContext, error: unknown) => Outcome,
) {
  const slot = (ctx: RequestContext, entry: PreparedPlan, key: string): Promise<Outcome> => {
    const most = entry.plan.connections as number;
    return store.slots.acquire(key, most, services.now()).then((taken) => {
      if (taken === "unavailable") return unavailable(ctx, new Error("slots unavailable"));
      if (taken === "full") {
        // `limits.dry_run`: counted and let through, as every limit is.
        ctx.decision = dryRun ? "dry_run_rate_limited" : "rate_limited";
        services.metrics.limitRefusals.inc({
          refusal: "rate_limited",
          dry_run: String(dryRun),
          plan: entry.plan.name,
          limit: "connections",
        });
        return dryRun ? undefined : tooManyConnections(most);
      }
      (ctx.upgrade as Upgrade).lease = taken;
      return undefined;
    });
  };
  return (ctx: RequestContext, entry: PreparedPlan, key: string, outcome: Outcome) =>
    outcome !== undefined || ctx.upgrade === undefined || entry.plan.connections === undefined
      ? outcome
      : slot(ctx, entry, key);
}

/**
 * Counts the request against its plan (the client's, or for `auth: none` the anonymous plan keyed
 * by client IP), puts the limit headers on every response to it, and answers 429 over a limit.
 * Requests without a plan pass untouched; with the memory store, counting is synchronous too.
 */
export function createLimitsStage(
  settings: LimitsSettings,
  store: CounterStore,
  services: Services,
): Stage {
  const enforcer = createEnforcer(settings, store, services.now);
  const { anonymous, clients, issuers } = enforcer;
  const style: HeaderStyle = { reset: settings.resetHeader, ...settings.headers };
  const { metrics } = services;

  const apply = (ctx: RequestContext, entry: PreparedPlan, decision: Decision): Outcome => {
    const plan = entry.plan.name;
    const policy = style.ietf ? entry.policy(services.now()) : "";
    const reply = renderDecision(decision, ctx.responseHeaders, style, policy);
    const { refusal } = decision;
    if (refusal === undefined) {
      ctx.decision = "allowed";
    } else if (decision.allowed) {
      ctx.decision = `dry_run_${refusal}`;
      metrics.limitRefusals.inc({ refusal, dry_run: "true", plan, limit: decision.policy });
      services.log.info(
        { requestId: ctx.requestId, plan, refusal, limit: decision.policy, clientId: ctx.clientId },
        "dry run: the request is over a limit and would have been refused",
      );
    } else {
      ctx.decision = refusal;
      metrics.limitRefusals.inc({ refusal, dry_run: "false", plan, limit: decision.policy });
    }
    if (decision.allowed) {
      // Near a limit: 20% or less of it left after this request.
      for (const state of decision.limits) {
        if (state.remaining * 5 <= state.limit) metrics.limitNear.inc({ plan, limit: state.name });
      }
    }
    return reply;
  };

  // Counting failed: Redis is down or slower than `redis.timeout` (with `on_outage: local` the
  // memory fallback answers instead, and nothing fails). `open` forwards the request uncounted,
  // without limit headers; `closed` answers 503.
  const outage = createOutage(settings.store, services.metrics);
  const unavailable = (ctx: RequestContext, error: unknown): Outcome => {
    const passes = outage.passes();
    // The outage itself is logged once by the store; each request only at debug level.
    services.log.debug({ requestId: ctx.requestId, err: error }, "limits not counted");
    if (!passes) {
      ctx.decision = "limits_unavailable";
      return LIMITS_UNAVAILABLE;
    }
    ctx.decision = "limits_open";
    return undefined;
  };

  const withSlot = connectionSlots(store, services, settings.dryRun, unavailable);

  return function limits(ctx) {
    const route = ctx.route;
    if (route === undefined) return undefined;
    const anonymousRoute = route.auth === "none";
    const plan = anonymousRoute
      ? anonymous
      : ctx.clientKey === undefined
        ? undefined
        : clientPlan(clients, issuers, ctx.clientKey, ctx.issuer);
    if (plan === undefined) return undefined;
    // A provider's clients are counted under `<issuer>:<id>`: apart from an own client of the
    // same id and from every other issuer's.
    const key = anonymousRoute ? addressKey(ctx.client.address) : `client:${ctx.clientKey}`;
    const decision = enforcer.check(plan, key, route.cost);
    return decision instanceof Promise
      ? decision.then(
          (settled) => withSlot(ctx, plan, key, apply(ctx, plan, settled)),
          (error: unknown) => unavailable(ctx, error),
        )
      : withSlot(ctx, plan, key, apply(ctx, plan, decision));
  };
}
