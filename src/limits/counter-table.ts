/**
 * The memory store's counters: a table by slot and subject, and a binary min-heap of the same
 * counters ordered by their end, from which ended counters are swept in bounded steps so that
 * their memory is given back.
 */

/** One counter. A new object replaces an ended one, so a heap entry for the old one is stale. */
export interface Counter {
  readonly slot: string;
  readonly subject: string;
  value: number;
  readonly endsAt: number;
}

/** The counters of one memory store. */
export interface CounterTable {
  /** The live counter of `subject` in `slot`, or undefined when there is none or it has ended. */
  live(slot: string, subject: string, nowMs: number): Counter | undefined;
  /** Sets a new counter, in place of any other of its slot and subject. */
  create(slot: string, subject: string, value: number, endsAt: number): Counter;
  /** Forgets the counter of `subject` in `slot`, if there is one. */
  remove(slot: string, subject: string): void;
  /** Forgets at most `budget` counters that ended by `nowMs`, the earliest first. */
  sweep(nowMs: number, budget: number): void;
  /** Every counter held, ended ones not yet swept included. */
  all(): Iterable<Counter>;
  /** How many counters are held, ended ones not yet swept included. */
  size(): number;
}

// Adds `counter` to the heap.
function push(heap: Counter[], counter: Counter): void {
  let index = heap.push(counter) - 1;
  while (index > 0) {
    const parent = (index - 1) >> 1;
    const above = heap[parent] as Counter;
    if (above.endsAt <= counter.endsAt) break;
    heap[index] = above;
    index = parent;
  }
  heap[index] = counter;
}

// Removes the heap's top, the counter that ends first.
function popTop(heap: Counter[]): void {
  const last = heap.pop() as Counter;
  if (heap.length === 0) return;
  let index = 0;
  for (;;) {
    const left = 2 * index + 1;
    if (left >= heap.length) break;
    const right = left + 1;
    const child =
      right < heap.length && (heap[right] as Counter).endsAt < (heap[left] as Counter).endsAt
        ? right
        : left;
    if ((heap[child] as Counter).endsAt >= last.endsAt) break;
    heap[index] = heap[child] as Counter;
    index = child;
  }
  heap[index] = last;
}

/** Creates an empty table. */
export function createCounterTable(): CounterTable {
  // By slot name, then by subject: a request looks up each of its slots by the same subject
  // string, whose hash V8 then computes once, and a slot's name is a constant.
  const tables = new Map<string, Map<string, Counter>>();
  const table = (slot: string): Map<string, Counter> => {
    let found = tables.get(slot);
    if (found === undefined) {
      found = new Map();
      tables.set(slot, found);
    }
    return found;
  };
  // Stale entries (replaced or removed counters) are skipped when they reach the top.
  const heap: Counter[] = [];

  return {
    live(slot, subject, nowMs) {
      const counter = tables.get(slot)?.get(subject);
      return counter !== undefined && counter.endsAt > nowMs ? counter : undefined;
    },
    create(slot, subject, value, endsAt) {
      const counter: Counter = { slot, subject, value, endsAt };
      table(slot).set(subject, counter);
      push(heap, counter);
      return counter;
    },
    remove(slot, subject) {
      tables.get(slot)?.delete(subject);
    },
    sweep(nowMs, budget) {
      for (let n = 0; n < budget && heap.length > 0; n++) {
        const top = heap[0] as Counter;
        if (top.endsAt > nowMs) return;
        popTop(heap);
        const owner = tables.get(top.slot);
        if (owner?.get(top.subject) === top) owner.delete(top.subject);
      }
    },
    *all() {
      for (const owner of tables.values()) yield* owner.values();
    },
    size: () => [...tables.values()].reduce((total, owner) => total + owner.size, 0),
  };
}
