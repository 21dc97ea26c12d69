/**
 * A bound on costly work (scrypt: tens of milliseconds of libuv's thread pool per call): at most
 * `limit` calls run at once, the others wait their turn in arrival order, and one that has not
 * started within `waitMs` is given up, so a flood is answered quickly instead of queueing without
 * end while holding memory and sockets.
 */
import type { Clock } from "../clock.js";

/** What `run` answers when no turn came within the wait. */
export const BUSY = Symbol("busy");

/** Counts the callers waiting for a turn (a gauge). */
export interface WaitingGauge {
  inc(): void;
  dec(): void;
}

/** Runs work within the bound. */
export interface WorkBound {
  /** Runs `work` once a turn is free; BUSY, without running it, when none came in time. */
  run<T>(work: () => Promise<T>): Promise<T | typeof BUSY>;
}

/** A bound of `limit` concurrent calls; a caller waits at most `waitMs` by `clock`. */
export function createWorkBound(
  limit: number,
  waitMs: number,
  clock: Clock,
  waiting: WaitingGauge,
): WorkBound {
  let running = 0;
  // Each waiter's start, in arrival order (a Set keeps insertion order and deletes in O(1)).
  const queue = new Set<() => void>();
  const finished = (): void => {
    const next = queue.values().next();
    if (next.done === true) {
      running--;
      return;
    }
    // The finished call's turn passes to the next waiter: `running` stays as it is.
    queue.delete(next.value);
    next.value();
  };
  const turn = (): Promise<boolean> =>
    new Promise((resolve) => {
      const start = (): void => {
        timer.cancel();
        waiting.dec();
        resolve(true);
      };
      const timer = clock.after(waitMs, () => {
        queue.delete(start);
        waiting.dec();
        resolve(false);
      });
      queue.add(start);
      waiting.inc();
    });

  return {
    async run(work) {
      if (running < limit) running++;
      else if (!(await turn())) return BUSY;
      try {
        return await work();
      } finally {
        finished();
      }
    },
  };
}
