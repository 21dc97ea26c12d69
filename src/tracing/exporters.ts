/**
 * The span exporters of a process: none while `tracing.otlp_endpoint` is empty, and then the
 * OpenTelemetry SDK is not even loaded (docs/operations.md, Traces). A reload that keeps the
 * export settings keeps the exporter and its queued spans; one that changes them gets a new one,
 * and the old one is shut down with its queue flushed, best effort, without holding the reload.
 */
import type { Counter } from "prom-client";
import { exporterKey, type TracingSettings } from "./settings.js";
import type { SpanExport } from "./span-export.js";

/** The exporters in use. */
export interface SpanExports {
  /** The recorder for `settings`; undefined when they export nothing. */
  recorderFor(settings: TracingSettings): Promise<SpanExport | undefined>;
  /** After a reload: shuts `previous` down (in the background) unless `next` is the same. */
  replace(previous: SpanExport | undefined, next: SpanExport | undefined): void;
  /** At shutdown: flushes and stops every exporter. */
  close(): Promise<void>;
}

/**
 * Creates the exporters' registry; spans that cannot be sent are counted in `dropped`, and
 * `now` (epoch milliseconds) dates them.
 */
export function createSpanExports(dropped: Counter, now: () => number): SpanExports {
  const exports = new Map<string, SpanExport>();
  const stopping = new Set<Promise<void>>();
  return {
    async recorderFor(settings) {
      if (settings.tracesUrl === undefined) return undefined;
      const key = exporterKey(settings);
      let found = exports.get(key);
      if (found === undefined) {
        const { openOtlpExport } = await import("./otlp.js");
        found = openOtlpExport(settings, key, dropped, now);
        exports.set(key, found);
      }
      return found;
    },
    replace(previous, next) {
      if (previous === undefined || previous === next) return;
      exports.delete(previous.key);
      const stopped = previous.shutdown().finally(() => stopping.delete(stopped));
      stopping.add(stopped);
    },
    async close() {
      await Promise.all([...stopping, ...[...exports.values()].map((e) => e.shutdown())]);
    },
  };
}
