/** A clock that moves only when a test moves it, firing the timers that fall due in order. */
import type { Clock } from "../../src/clock.js";

/** A Clock whose time advances by `advance` alone. */
export interface ManualClock extends Clock {
  /** Moves time forward by `ms`, running every timer due on the way at its own time. */
  advance(ms: number): void;
}

interface Pending {
  at: number;
  readonly every: number | undefined;
  readonly run: () => void;
  readonly order: number;
}

/** A manual clock starting at `start` milliseconds. */
export function manualClock(start = 0): ManualClock {
  let now = start;
  let order = 0;
  const pending = new Set<Pending>();
  const add = (ms: number, run: () => void, every: number | undefined) => {
    const timer: Pending = { at: now + Math.max(0, ms), every, run, order: order++ };
    pending.add(timer);
    return { cancel: () => void pending.delete(timer) };
  };
  return {
    monotonic: () => now,
    after: (ms, run) => add(ms, run, undefined),
    every: (ms, run) => add(ms, run, Math.max(1, ms)),
    advance(ms) {
      const end = now + ms;
      for (;;) {
        let next: Pending | undefined;
        for (const timer of pending) {
          if (
            timer.at <= end &&
            (next === undefined ||
              timer.at < next.at ||
              (timer.at === next.at && timer.order < next.order))
          ) {
            next = timer;
          }
        }
        if (next === undefined) break;
        now = next.at;
        if (next.every === undefined) pending.delete(next);
        else next.at += next.every;
        next.run();
      }
      now = end;
    },
  };
}
