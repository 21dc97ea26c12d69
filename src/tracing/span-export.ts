/** What an exporter offers the rest of gatehouse, without loading the SDK. */
import type { SpanRecorder } from "../core/spans.js";

/** A recorder that can be shut down, flushing what it holds. */
export interface SpanExport extends SpanRecorder {
  /** Equal for exports of the same settings (settings.ts, `exporterKey`). */
  readonly key: string;
  /** Sends the queued spans (each export bounded by `tracing.timeout`), then stops. */
  shutdown(): Promise<void>;
}
