/**
 * Time as gatehouse reads and waits for it: a monotonic reading for deadlines, and timers that
 * act on it. Every deadline, the access log's flush, the Redis health check and the memory
 * store's sweep take a Clock, so that a test moves time instead of waiting for it.
 */
import { performance } from "node:perf_hooks";

/** A timer a Clock has set; it never holds the process open. */
export interface Timer {
  cancel(): void;
}

/** A monotonic clock and its timers. */
export interface Clock {
  /** Milliseconds from an arbitrary origin; never goes backwards. */
  monotonic(): number;
  /** Calls `run` once after `ms` milliseconds. */
  after(ms: number, run: () => void): Timer;
  /** Calls `run` every `ms` milliseconds. */
  every(ms: number, run: () => void): Timer;
}

function unrefd(timer: NodeJS.Timeout, cancel: (timer: NodeJS.Timeout) => void): Timer {
  timer.unref();
  return { cancel: () => cancel(timer) };
}

/** The process's own clock: performance.now() and Node's timers. */
export const systemClock: Clock = {
  monotonic: () => performance.now(),
  after: (ms, run) => unrefd(setTimeout(run, ms), clearTimeout),
  every: (ms, run) => unrefd(setInterval(run, ms), clearInterval),
};
