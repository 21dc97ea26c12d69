import type { Stage } from "../core/context.js";

// Accept a caller's id only when it is short and made of visible token characters, so it is
// safe to echo in a header and a log line.
const VALID_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Takes the inbound X-Request-Id when it is well-formed, otherwise generates one. */
export function createRequestIdStage(newId: () => string): Stage {
  return function requestId(ctx) {
    const inbound = ctx.req.headers["x-request-id"];
    ctx.requestId = typeof inbound === "string" && VALID_ID.test(inbound) ? inbound : newId();
    return undefined;
  };
}
