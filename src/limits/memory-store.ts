/**
 * The memory store: counters in this process, for one replica and for the Redis store's local
 * fallback. No timer per counter (Node clamps a `setTimeout` delay over 2^31-1 ms, about 24.8
 * days, to 1 ms, which would end a monthly counter at once): each counter carries its end, is
 * read as empty once it has ended, and ended counters are swept from a heap ordered by their end,
 * a little on every count and in bounded steps on an unref'd timer, so their memory is given back.
 */
import {
  refuses,
  slotEnd,
  type Counted,
  type CounterStore,
  type Slot,
  type Where,
} from "./counters.js";

/** One counter. A new object replaces an ended one, so a heap entry for the old one is stale. */
interface Counter {
  readonly slot: string;
  readonly subject: string;
  value: number;
  readonly endsAt: number;
}

/** One saved counter: its full key (`SLOT|SUBJECT`), its points and its end (epoch milliseconds). */
export interface SavedCounter {
  readonly key: string;
  readonly value: number;
  readonly endsAt: number;
}

/** The memory store, which can also save its counters and take them back after a restart. */
export interface MemoryStore extends CounterStore {
  commit(
    subject: string,
    slots: readonly Slot[],
    cost: number,
    force: boolean,
    nowMs: number,
  ): Counted;
  read(subject: string, slots: readonly Slot[], nowMs: number): Counted;
  /** Every counter that has not ended at `nowMs`. */
  save(nowMs: number): SavedCounter[];
  /** Puts saved counters back; those that ended by `nowMs` are left out. */
  restore(saved: readonly SavedCounter[], nowMs: number): void;
  /** Counters held now, ended ones not yet swept included. */
  size(): number;
  /** Sweeps every ended counter now. */
  sweep(nowMs: number): void;
  /** Stops the background sweep. */
  close(): void;
}

/** What a memory store is built with. */
export interface MemoryStoreOptions {
  /** The clock the background sweep reads; counting takes the request's own time. */
  readonly now: () => number;
  /** Names the store's counts in results (`fallback` for the Redis store's stand-in). */
  readonly where?: Where;
  /** How often ended counters are swept in the background (default 1 s); 0: never. */
  readonly sweepEveryMs?: number;
}

// Each count sweeps at most this many ended counters: more than a count can create, so the
// sweep keeps pace with any load, and little enough to cost nothing noticeable.
const SWEEP_PER_COUNT = 4;
// A background sweep takes at most this many per tick, so a mass expiry never stalls requests.
const SWEEP_PER_TICK = 20_000;

/** Creates a memory store. */
export function createMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const where = options.where ?? "store";
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
  // A binary min-heap of counters by end; stale entries (replaced or deleted) are skipped.
  const heap: Counter[] = [];

  const push = (counter: Counter): void => {
    let index = heap.push(counter) - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      const above = heap[parent] as Counter;
      if (above.endsAt <= counter.endsAt) break;
      heap[index] = above;
      index = parent;
    }
    heap[index] = counter;
  };
  const popTop = (): void => {
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
  };
  const sweep = (nowMs: number, budget: number): void => {
    for (let n = 0; n < budget && heap.length > 0; n++) {
      const top = heap[0] as Counter;
      if (top.endsAt > nowMs) return;
      popTop();
      const owner = tables.get(top.slot);
      if (owner?.get(top.subject) === top) owner.delete(top.subject);
    }
  };
  // A live counter, or undefined when there is none or it has ended.
  const live = (slot: string, subject: string, nowMs: number): Counter | undefined => {
    const counter = tables.get(slot)?.get(subject);
    return counter !== undefined && counter.endsAt > nowMs ? counter : undefined;
  };
  const create = (slot: string, subject: string, value: number, endsAt: number): Counter => {
    const counter: Counter = { slot, subject, value, endsAt };
    table(slot).set(subject, counter);
    push(counter);
    return counter;
  };
  const look = (subject: string, slots: readonly Slot[], nowMs: number) => {
    const found: Array<Counter | undefined> = [];
    for (const slot of slots) found.push(live(slot.name, subject, nowMs));
    return found;
  };
  const report = (
    slots: readonly Slot[],
    found: ReadonlyArray<Counter | undefined>,
    added: boolean,
    nowMs: number,
  ): Counted => ({
    added,
    counts: found.map((counter) => counter?.value ?? 0),
    // A counter not created yet would end a whole window from now.
    endsAt: found.map((counter, i) => counter?.endsAt ?? slotEnd(slots[i] as Slot, nowMs)),
    where,
  });

  const timer =
    options.sweepEveryMs === 0
      ? undefined
      : setInterval(() => sweep(options.now(), SWEEP_PER_TICK), options.sweepEveryMs ?? 1000);
  timer?.unref();

  return {
    healthy: () => true,
    commit(subject, slots, cost, force, nowMs) {
      sweep(nowMs, SWEEP_PER_COUNT);
      const found = look(subject, slots, nowMs);
      let room = true;
      for (let i = 0; i < slots.length; i++) {
        if (refuses(found[i]?.value ?? 0, false, cost, (slots[i] as Slot).limit)) room = false;
      }
      if (!room && !force) return report(slots, found, false, nowMs);
      for (let i = 0; i < slots.length; i++) {
        const counter = found[i];
        if (counter === undefined) {
          const slot = slots[i] as Slot;
          found[i] = create(slot.name, subject, cost, slotEnd(slot, nowMs));
        } else {
          counter.value += cost;
        }
      }
      return report(slots, found, true, nowMs);
    },
    read(subject, slots, nowMs) {
      return report(slots, look(subject, slots, nowMs), false, nowMs);
    },
    takeBack(subject, slots, points, _where, nowMs) {
      for (const counter of look(subject, slots, nowMs)) {
        if (counter !== undefined) counter.value = Math.max(0, counter.value - points);
      }
      return Promise.resolve();
    },
    reset(subject, slots) {
      for (const slot of slots) tables.get(slot.name)?.delete(subject);
      return Promise.resolve();
    },
    save(nowMs) {
      const saved: SavedCounter[] = [];
      for (const owner of tables.values()) {
        for (const { slot, subject, value, endsAt } of owner.values()) {
          if (endsAt > nowMs) saved.push({ key: `${slot}|${subject}`, value, endsAt });
        }
      }
      return saved;
    },
    restore(saved, nowMs) {
      for (const { key, value, endsAt } of saved) {
        // Counter names never hold `|` (plan, client and limit names cannot), subjects may.
        const bar = key.indexOf("|");
        const slot = key.slice(0, bar);
        const subject = key.slice(bar + 1);
        if (bar > 0 && endsAt > nowMs && live(slot, subject, nowMs) === undefined) {
          create(slot, subject, value, endsAt);
        }
      }
    },
    size: () => [...tables.values()].reduce((total, owner) => total + owner.size, 0),
    sweep: (nowMs) => sweep(nowMs, Number.POSITIVE_INFINITY),
    close: () => clearInterval(timer),
  };
}
