/**
 * Deadlines for many short-lived exchanges behind one timer. A timer per request would allocate
 * and link a timer object for every forwarded request, although nearly all of them end long
 * before their deadline; here an exchange is an entry in an array, and one timer, armed for the
 * earliest deadline, expires whatever is due when it fires.
 *
 * The pending exchanges are an array with swap-removal, not a Set: a Set that is added to and
 * deleted from on every request is rebuilt every few dozen requests, and V8 links each retired
 * table to its successor and keeps the entries it held. Once one retired table has been promoted
 * to the old generation, that chain keeps every later table, and every exchange, context and
 * socket buffer they hold, alive through each young-generation collection until the next full
 * one. Measured on forwarded requests after a memory-reducing collection: 1.7 MB promoted per
 * scavenge instead of 4 KB, and 1.45x the CPU per request.
 */
import { systemClock, type Clock, type Timer } from "../clock.js";

/** Something with a deadline, in the clock's monotonic milliseconds. */
export interface Timed {
  deadline: number;
  /** Where the item sits among the pending ones, -1 when it is not pending; kept by Deadlines. */
  slot: number;
}

/** The pending deadlines of one forwarder. */
export interface Deadlines<T extends Timed> {
  /** Starts watching `item` until `remove`; `expire` is called once if its deadline passes. */
  add(item: T): void;
  remove(item: T): void;
}

/** Creates the deadlines; `expire` receives each item whose deadline has passed, once. */
export function createDeadlines<T extends Timed>(
  expire: (item: T) => void,
  clock: Clock = systemClock,
): Deadlines<T> {
  const pending: T[] = [];
  // A deadline never holds the process open (the clock's timers do not): the request it guards does.
  let timer: Timer | undefined;
  let armedFor = Infinity;

  function arm(at: number): void {
    if (at >= armedFor) return;
    timer?.cancel();
    armedFor = at;
    timer = clock.after(Math.max(0, Math.ceil(at - clock.monotonic())), sweep);
  }

  function remove(item: T): void {
    const { slot } = item;
    if (slot < 0) return;
    const last = pending.pop() as T;
    if (last !== item) {
      pending[slot] = last;
      last.slot = slot;
    }
    item.slot = -1;
  }

  function sweep(): void {
    timer = undefined;
    armedFor = Infinity;
    const now = clock.monotonic();
    const due: T[] = [];
    let next = Infinity;
    // Backwards, so the item that swap-removal moves into a slot has been looked at already.
    for (let i = pending.length - 1; i >= 0; i--) {
      const item = pending[i] as T;
      if (item.deadline <= now) {
        remove(item);
        due.push(item);
      } else if (item.deadline < next) {
        next = item.deadline;
      }
    }
    if (next !== Infinity) arm(next);
    // After the pending list is consistent: expiring one may remove or add others.
    for (const item of due) expire(item);
  }

  return {
    add(item) {
      if (item.slot >= 0) return;
      item.slot = pending.length;
      pending.push(item);
      arm(item.deadline);
    },
    remove,
  };
}
