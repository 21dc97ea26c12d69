import { canonicalTarget, PATH_REJECTION_MESSAGES } from "../http/path.js";
import { errorReply, type Stage } from "../core/context.js";

/** Canonicalises the request-target once (docs/forwarding.md); an ambiguous one is refused with 400. */
export function createCanonicalPathStage(): Stage {
  return function canonicalPath(ctx) {
    const target = canonicalTarget(ctx.req.url ?? "");
    if (typeof target === "string") {
      return errorReply(400, "invalid_path", PATH_REJECTION_MESSAGES[target]);
    }
    ctx.path = target.path;
    ctx.query = target.query;
    return undefined;
  };
}
