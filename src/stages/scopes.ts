import type { Counter } from "prom-client";
import type { Reply, Stage } from "../core/context.js";
import type { Route, RouteTable } from "../routes/table.js";
import { insufficientScopeAnswers, refused, type ByVariant } from "../tokens/bearer-answers.js";
import { variantOf, type Challenges } from "../tokens/metadata.js";

/**
 * Refuses a bearer token that lacks the scopes its route needs (`scopes`: all of them,
 * `scopes_any`: one), after the token is verified and before anything counts the request; the
 * refusal is logged and counted (`failures`) as bearer_insufficient_scope.
 */
export function createScopesStage(
  table: RouteTable,
  challenges: Challenges,
  failures: Counter<"reason">,
): Stage {
  const refusals = new Map<Route, ByVariant<Reply>>();
  for (const route of table.routes) {
    if (route.scopes !== undefined) {
      refusals.set(route, insufficientScopeAnswers(route.scopes, challenges));
    }
  }
  const none = new Set<string>();
  return function scopes(ctx) {
    const route = ctx.route;
    const rule = route?.scopes;
    if (rule === undefined) return undefined;
    const granted = ctx.scopes?.names ?? none;
    const allowed = rule.every
      ? rule.names.every((name) => granted.has(name))
      : rule.names.some((name) => granted.has(name));
    if (allowed) return undefined;
    const answers = refusals.get(route as Route) as ByVariant<Reply>;
    const variant = variantOf((route as Route).dpopRequired, ctx.dpop);
    return refused(ctx, failures, "insufficient_scope", answers[variant]);
  };
}
