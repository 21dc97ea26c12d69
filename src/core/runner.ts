/** Runs the ordered stages for one request until one answers. */
import { HANDLED, errorReply, type Outcome, type RequestContext, type Stage } from "./context.js";
import { sendReply } from "./respond.js";
import type { Services } from "./services.js";

/**
 * Runs `stages` in order. Synchronous stages run without a promise or a closure; the first stage
 * that returns a Reply or HANDLED ends the run. A stage that throws answers 500 and the process
 * goes on.
 */
export function runPipeline(
  stages: readonly Stage[],
  ctx: RequestContext,
  services: Services,
): void {
  runFrom(0, stages, ctx, services);
}

function runFrom(
  start: number,
  stages: readonly Stage[],
  ctx: RequestContext,
  services: Services,
): void {
  let index = start;
  try {
    while (index < stages.length) {
      const outcome = (stages[index++] as Stage)(ctx);
      if (outcome === undefined) continue;
      if (outcome instanceof Promise) {
        const next = index;
        outcome.then(
          (settled: Outcome) => {
            if (settled === undefined) runFrom(next, stages, ctx, services);
            else settle(settled, ctx, services);
          },
          (error: unknown) => fail(error, ctx, services),
        );
        return;
      }
      settle(outcome, ctx, services);
      return;
    }
    fail(new Error("no stage answered the request"), ctx, services);
  } catch (error) {
    fail(error, ctx, services);
  }
}

function settle(
  outcome: Exclude<Outcome, undefined>,
  ctx: RequestContext,
  services: Services,
): void {
  if (outcome !== HANDLED) sendReply(ctx, outcome, services.lifecycle);
}

/** Answers 500 for a request that gatehouse itself failed to handle, and logs why. */
export function fail(error: unknown, ctx: RequestContext, services: Services): void {
  services.log.error({ err: error, requestId: ctx.requestId }, "request failed inside gatehouse");
  sendReply(
    ctx,
    errorReply(500, "internal_error", "gatehouse failed to handle the request"),
    services.lifecycle,
  );
}
