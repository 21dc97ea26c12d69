/**
 * Deadlines for many short-lived exchanges behind one timer. A timer per request would allocate
 * and link a timer object for every forwarded request, although nearly all of them end long
 * before their deadline; here an exchange is a set entry, and one timer, armed for the earliest
 * deadline, expires whatever is due when it fires.
 */
import { performance } from "node:perf_hooks";

/** Something with a deadline, in performance.now() milliseconds. */
export interface Timed {
  deadline: number;
}

/** The pending deadlines of one forwarder. */
export interface Deadlines<T extends Timed> {
  /** Starts watching `item` until `remove`; `expire` is called once if its deadline passes. */
  add(item: T): void;
  remove(item: T): void;
}

/** Creates the set; `expire` receives each item whose deadline has passed, once. */
export function createDeadlines<T extends Timed>(expire: (item: T) => void): Deadlines<T> {
  const pending = new Set<T>();
  let timer: NodeJS.Timeout | undefined;
  let armedFor = Infinity;

  function arm(at: number): void {
    if (at >= armedFor) return;
    clearTimeout(timer);
    armedFor = at;
    timer = setTimeout(sweep, Math.max(0, Math.ceil(at - performance.now())));
    // A deadline never holds the process open: the request it guards does.
    timer.unref();
  }

  function sweep(): void {
    timer = undefined;
    armedFor = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const item of pending) {
      if (item.deadline <= now) {
        pending.delete(item);
        expire(item);
      } else if (item.deadline < next) {
        next = item.deadline;
      }
    }
    if (next !== Infinity) arm(next);
  }

  return {
    add(item) {
      pending.add(item);
      arm(item.deadline);
    },
    remove(item) {
      pending.delete(item);
    },
  };
}
