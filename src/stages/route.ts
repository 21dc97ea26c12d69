import { errorReply, type Reply, type Stage } from "../core/context.js";
import type { RouteTable } from "../routes/table.js";

const NOT_FOUND = errorReply(404, "not_found", "no route matches this path");

// The admin API's paths, which a newcomer tries on the public port first.
const ADMIN_PATHS = /^\/(metrics|config|version|limits)(\/|$)/;

/**
 * Looks the canonical path up in the allowlist: 404, 405 with Allow, or the route. A 404 for one
 * of the admin API's paths says where that API is served: `adminListen`, as the file gives it.
 */
export function createRouteStage(table: RouteTable, adminListen: string): Stage {
  const adminNotHere: Reply = errorReply(
    404,
    "not_found",
    `no route matches this path; the admin API is served on admin_listen (${adminListen}), not here`,
  );
  return function route(ctx) {
    const match = table.match(ctx.req.method ?? "", ctx.path);
    if (match.kind === "route") {
      ctx.route = match.route;
      return undefined;
    }
    if (match.kind === "not_found") return ADMIN_PATHS.test(ctx.path) ? adminNotHere : NOT_FOUND;
    return errorReply(405, "method_not_allowed", "this route does not allow this method", {
      allow: match.allow,
    });
  };
}
