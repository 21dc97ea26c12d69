/**
 * A binary min-heap of things that end, ordered by their end, from which ended ones are taken
 * in bounded steps: the memory store's counters and a Redis store's record of refusals both give
 * their memory back this way, with no timer per entry.
 */

/** Something with an end, epoch milliseconds. */
export interface Ending {
  readonly endsAt: number;
}

/** Entries ordered by their end. */
export interface EndHeap<Entry extends Ending> {
  push(entry: Entry): void;
  /**
   * Takes at most `budget` entries that ended by `nowMs`, the earliest first, passing each to
   * `ended`.
   */
  takeEnded(nowMs: number, budget: number, ended: (entry: Entry) => void): void;
  /** How many entries are held, stale ones (replaced by their owner) included. */
  readonly length: number;
}

/** Creates an empty heap. */
export function createEndHeap<Entry extends Ending>(): EndHeap<Entry> {
  const heap: Entry[] = [];

  const popTop = (): void => {
    const last = heap.pop() as Entry;
    if (heap.length === 0) return;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child =
        right < heap.length && (heap[right] as Entry).endsAt < (heap[left] as Entry).endsAt
          ? right
          : left;
      if ((heap[child] as Entry).endsAt >= last.endsAt) break;
      heap[index] = heap[child] as Entry;
      index = child;
    }
    heap[index] = last;
  };

  return {
    push(entry) {
      let index = heap.push(entry) - 1;
      while (index > 0) {
        const parent = (index - 1) >> 1;
        const above = heap[parent] as Entry;
        if (above.endsAt <= entry.endsAt) break;
        heap[index] = above;
        index = parent;
      }
      heap[index] = entry;
    },
    takeEnded(nowMs, budget, ended) {
      for (let n = 0; n < budget && heap.length > 0; n++) {
        const top = heap[0] as Entry;
        if (top.endsAt > nowMs) return;
        popTop();
        ended(top);
      }
    },
    get length() {
      return heap.length;
    },
  };
}
