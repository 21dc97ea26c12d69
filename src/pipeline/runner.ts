/** Runs the ordered stages for one request until one answers. */
import { HANDLED, errorReply, type Outcome, type RequestContext, type Stage } from "./context.js";
import { sendReply } from "./respond.js";
import type { Services } from "./services.js";

/**
 * Runs `stages` in order. Synchronous stages run without a promise; the first stage that returns
 * a Reply or HANDLED ends the run. A stage that throws answers 500 and the process goes on.
 */
export function runPipeline(
  stages: readonly Stage[],
  ctx: RequestContext,
  services: Services,
): void {
  let index = 0;
  const fail = (error: unknown): void => {
    services.log.error({ err: error, requestId: ctx.requestId }, "request failed inside gatehouse");
    sendReply(
      ctx,
      errorReply(500, "internal_error", "gatehouse failed to handle the request"),
      services.lifecycle,
    );
  };
  const settle = (outcome: Outcome): void => {
    if (outcome === undefined) {
      next();
    } else if (outcome !== HANDLED) {
      sendReply(ctx, outcome, services.lifecycle);
    }
  };
  const next = (): void => {
    try {
      while (index < stages.length) {
        const outcome = (stages[index++] as Stage)(ctx);
        if (outcome === undefined) continue;
        if (outcome instanceof Promise) {
          outcome.then(settle, fail);
          return;
        }
        settle(outcome);
        return;
      }
      fail(new Error("no stage answered the request"));
    } catch (error) {
      fail(error);
    }
  };
  next();
}
