import { errorReply, type Stage } from "../core/context.js";
import type { RouteTable } from "../routes/table.js";

const NOT_FOUND = errorReply(404, "not_found", "no route matches this path");

/** Looks the canonical path up in the allowlist: 404, 405 with Allow, or the route. */
export function createRouteStage(table: RouteTable): Stage {
  return function route(ctx) {
    const match = table.match(ctx.req.method ?? "", ctx.path);
    if (match.kind === "route") {
      ctx.route = match.route;
      return undefined;
    }
    if (match.kind === "not_found") return NOT_FOUND;
    return errorReply(405, "method_not_allowed", "this route does not allow this method", {
      allow: match.allow,
    });
  };
}
