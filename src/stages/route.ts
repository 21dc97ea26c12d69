import { errorReply, type Stage } from "../core/context.js";
import type { RouteTable } from "../routes/table.js";

const NOT_FOUND = errorReply(404, "not_found", "no route matches this path");
// Named by its key, not its address: the public listener tells no stranger where the admin API is.
const ADMIN_NOT_HERE = errorReply(
  404,
  "not_found",
  "no route matches this path; the admin API is served on admin_listen, not on this listener",
);

// The process's WebSocket cap (upstream.websocket.max_connections) is reached: a client retries.
const WEBSOCKETS_FULL = errorReply(
  503,
  "temporarily_unavailable",
  "this replica has as many WebSocket connections open as it takes; retry later",
  { "retry-after": "5" },
);

// The admin API's paths, which a newcomer tries on the public port first.
const ADMIN_PATHS = /^\/(metrics|config|version|limits)(\/|$)/;

/**
 * Looks the canonical path up in the allowlist: 404, 405 with Allow, or the route. A 404 for one
 * of the admin API's paths says that the API is served on `admin_listen`. A WebSocket handshake
 * over the process's WebSocket cap is refused here, 503 with Retry-After.
 */
export function createRouteStage(table: RouteTable): Stage {
  return function route(ctx) {
    const match = table.match(ctx.req.method ?? "", ctx.path);
    if (match.kind === "route") {
      ctx.route = match.route;
      // Before any token is checked: a handshake without room costs as little as can be.
      return ctx.upgrade?.room === false ? WEBSOCKETS_FULL : undefined;
    }
    if (match.kind === "not_found") return ADMIN_PATHS.test(ctx.path) ? ADMIN_NOT_HERE : NOT_FOUND;
    return errorReply(405, "method_not_allowed", "this route does not allow this method", {
      allow: match.allow,
    });
  };
}
