/** Where a finished request goes to become a span, when spans are exported. */
import type { RequestContext } from "./context.js";

/** Records one finished request as a SERVER span (present only while tracing exports). */
export interface SpanRecorder {
  /** Records `ctx`, answered with `status` after `durationMs`; unsampled requests are skipped. */
  record(ctx: RequestContext, status: number, durationMs: number): void;
}
