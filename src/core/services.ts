/** What stages may use besides the request: logging, metrics, time, ids and the process state. */
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import type { Metrics } from "../metrics.js";
import type { TraceIds } from "../http/trace-context.js";

/** The process's serving state, read by the readiness stage and the response writers. */
export interface Lifecycle {
  /** True from SIGTERM on: /readyz answers 503 and responses carry `Connection: close`. */
  readonly draining: boolean;
  /** Whether /readyz answers 200. */
  ready(): boolean;
}

/** Shared services, injected so tests can pin time and ids. */
export interface Services {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Epoch milliseconds. */
  readonly now: () => number;
  /** Monotonic time and timers: deadlines, durations, periodic work. */
  readonly clock: Clock;
  /** A new request id. */
  readonly newId: () => string;
  /** New trace and span ids (W3C Trace Context). */
  readonly traceIds: TraceIds;
  readonly lifecycle: Lifecycle;
}
