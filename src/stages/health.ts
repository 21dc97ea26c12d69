import { errorReply, type Reply, type Stage } from "../core/context.js";
import type { Lifecycle } from "../core/services.js";

const LIVE: Reply = {
  status: 200,
  headers: { "cache-control": "no-store" },
  body: { status: "ok" },
};
const READY: Reply = {
  status: 200,
  headers: { "cache-control": "no-store" },
  body: { status: "ready" },
};
const NOT_READY = errorReply(503, "not_ready", "gatehouse is not ready to serve", {
  "cache-control": "no-store",
});
const WRONG_METHOD = errorReply(405, "method_not_allowed", "health endpoints answer GET and HEAD", {
  allow: "GET, HEAD",
});

/** Answers the liveness and readiness paths itself: no auth, not counted, never forwarded. */
export function createHealthStage(
  paths: { liveness: string; readiness: string },
  lifecycle: Lifecycle,
): Stage {
  return function health(ctx) {
    const live = ctx.path === paths.liveness;
    if (!live && ctx.path !== paths.readiness) return undefined;
    ctx.own = live ? "liveness" : "readiness";
    if (ctx.req.method !== "GET" && ctx.req.method !== "HEAD") return WRONG_METHOD;
    if (live) return LIVE;
    return lifecycle.ready() ? READY : NOT_READY;
  };
}
