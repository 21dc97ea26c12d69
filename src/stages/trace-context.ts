import type { Stage } from "../core/context.js";
import { parseTraceParent, ratioSampler, type TraceIds } from "../http/trace-context.js";

/**
 * Gives the request its trace and span ids (W3C Trace Context). A valid inbound `traceparent`
 * is continued: its trace id, its span as the parent, its sampled flag (OpenTelemetry's default
 * ParentBased sampler). Otherwise a trace starts here, sampled at `sampleRatio` (TraceIdRatioBased
 * on the new trace id), and an inbound `tracestate` is not kept: it belongs to the trace refused.
 */
export function createTraceContextStage(sampleRatio: number, ids: TraceIds): Stage {
  const sampleRoot = ratioSampler(sampleRatio);
  return function traceContext(ctx) {
    const { headers } = ctx.req;
    const inbound = headers.traceparent;
    const parent = parseTraceParent(typeof inbound === "string" ? inbound : undefined);
    ctx.spanId = ids.spanId();
    if (parent === undefined) {
      ctx.traceId = ids.traceId();
      ctx.sampled = sampleRoot(ctx.traceId);
    } else {
      ctx.traceId = parent.traceId;
      ctx.parentSpanId = parent.parentId;
      ctx.sampled = parent.sampled;
      const state = headers.tracestate;
      if (typeof state === "string") ctx.tracestate = state;
    }
    return undefined;
  };
}
