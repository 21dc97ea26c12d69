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
  /** Calls `run` once after `ms` milliseconds, however far away. */
  after(ms: number, run: () => void): Timer;
  /** Calls `run` every `ms` milliseconds; `ms` is at most MAX_TIMER_MS. */
  every(ms: number, run: () => void): Timer;
}

/**
 * The longest delay one Node timer holds (2^31-1 ms, 24.8 days): a longer one fires after 1 ms
 * instead, so a wait beyond it is made of several timers.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

function unrefd(timer: NodeJS.Timeout, cancel: (timer: NodeJS.Timeout) => void): Timer {
  timer.unref();
  return { cancel: () => cancel(timer) };
}

// One timer for a wait Node holds, else a chain of them, each as long as Node holds and the last
// what is left, so that a token's `exp` weeks away is waited for and not taken as now.
function after(ms: number, run: () => void): Timer {
  let timer: NodeJS.Timeout;
  const wait = (left: number): void => {
    timer =
      left > MAX_TIMER_MS
        ? setTimeout(() => wait(left - MAX_TIMER_MS), MAX_TIMER_MS)
        : setTimeout(run, left);
    timer.unref();
  };
  wait(ms);
  return { cancel: () => clearTimeout(timer) };
}

/** The process's own clock: performance.now() and Node's timers. */
export const systemClock: Clock = {
  monotonic: () => performance.now(),
  after,
  every: (ms, run) => unrefd(setInterval(run, ms), clearInterval),
};
