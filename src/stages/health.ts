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

/** The liveness and readiness paths, as the config in force names them. */
export interface HealthPaths {
  readonly liveness: string;
  readonly readiness: string;
}

/**
 * Which health endpoint `path` is and its answer to `method`, or undefined for any other path.
 * The public listener and the admin listener both answer with it, so a probe learns the same
 * from either.
 */
export function healthAnswer(
  paths: HealthPaths,
  path: string,
  method: string | undefined,
  lifecycle: Lifecycle,
): { readonly own: "liveness" | "readiness"; readonly reply: Reply } | undefined {
  const live = path === paths.liveness;
  if (!live && path !== paths.readiness) return undefined;
  const own = live ? "liveness" : "readiness";
  if (method !== "GET" && method !== "HEAD") return { own, reply: WRONG_METHOD };
  if (live) return { own, reply: LIVE };
  return { own, reply: lifecycle.ready() ? READY : NOT_READY };
}

/** Answers the liveness and readiness paths itself: no auth, not counted, never forwarded. */
export function createHealthStage(paths: HealthPaths, lifecycle: Lifecycle): Stage {
  return function health(ctx) {
    const answer = healthAnswer(paths, ctx.path, ctx.req.method, lifecycle);
    if (answer === undefined) return undefined;
    ctx.own = answer.own;
    return answer.reply;
  };
}
