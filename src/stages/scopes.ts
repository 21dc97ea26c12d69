import type { Reply, Stage } from "../core/context.js";
import type { ErrorCode } from "../http/error-codes.js";
import type { Route, RouteTable, ScopeRule } from "../routes/table.js";
import type { BearerChallenge } from "../tokens/metadata.js";

// RFC 6750 §3.1: a valid token without the scope the resource needs is answered 403 with
// `insufficient_scope` and the scopes needed; the body says the same in JSON.
function insufficientScope(rule: ScopeRule, challenge: BearerChallenge): Reply {
  const error: ErrorCode = "insufficient_scope";
  const needed = rule.every ? "every one of these scopes" : "one of these scopes";
  return {
    status: 403,
    headers: {
      "www-authenticate": challenge(`error="insufficient_scope", scope="${rule.text}"`),
    },
    body: {
      error,
      error_description: `this route needs a token granted ${needed}: ${rule.text}`,
      scope: rule.text,
    },
  };
}

/**
 * Refuses a bearer token that lacks the scopes its route needs (`scopes`: all of them,
 * `scopes_any`: one), after the token is verified and before anything counts the request.
 */
export function createScopesStage(table: RouteTable, challenge: BearerChallenge): Stage {
  const refusals = new Map<Route, Reply>();
  for (const route of table.routes) {
    if (route.scopes !== undefined) refusals.set(route, insufficientScope(route.scopes, challenge));
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
    return allowed ? undefined : refusals.get(route as Route);
  };
}
