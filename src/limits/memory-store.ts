/**
 * The memory store: counters in this process, for one replica and for the Redis store's local
 * fallback. No timer per counter (Node clamps a `setTimeout` delay over 2^31-1 ms, about 24.8
 * days, to 1 ms, which would end a monthly counter at once): each counter carries its end, is
 * read as empty once it has ended, and ended counters are swept from a heap ordered by their end,
 * a little on every count and in bounded steps on an unref'd timer, so their memory is given back
 * (counter-table.ts).
 */
import { createMemorySlots } from "./connection-slots.js";
import {
  refuses,
  slotEnd,
  type Counted,
  type CounterStore,
  type Slot,
  type Where,
} from "./counters.js";
import {
  createCounterTable,
  type Counter,
  type CounterTable,
  type TableFootprint,
} from "./counter-table.js";
import { systemClock, type Clock } from "../clock.js";

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
  /** What the store holds now, ended counters not yet swept included. */
  footprint(): TableFootprint;
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
  /** The timers of the background sweep (default the process's own). */
  readonly clock?: Clock;
}

// Each count sweeps at most this many ended counters: more than a count can create, so the
// sweep keeps pace with any load, and little enough to cost nothing noticeable.
const SWEEP_PER_COUNT = 4;
// A background sweep takes at most this many per tick, so a mass expiry never stalls requests.
const SWEEP_PER_TICK = 20_000;

// Each slot's live counter, undefined where there is none.
function look(
  counters: CounterTable,
  subject: string,
  slots: readonly Slot[],
  nowMs: number,
): Array<Counter | undefined> {
  const found: Array<Counter | undefined> = [];
  for (const slot of slots) found.push(counters.live(slot.name, subject, nowMs));
  return found;
}

// What the batch found, as the store answers it.
function report(
  where: Where,
  slots: readonly Slot[],
  found: ReadonlyArray<Counter | undefined>,
  added: boolean,
  nowMs: number,
): Counted {
  return {
    added,
    counts: found.map((counter) => counter?.value ?? 0),
    // A counter not created yet would end a whole window from now.
    endsAt: found.map((counter, i) => counter?.endsAt ?? slotEnd(slots[i] as Slot, nowMs)),
    where,
  };
}

/** Creates a memory store. */
export function createMemoryStore(options: MemoryStoreOptions): MemoryStore {
  const where = options.where ?? "store";
  const counters = createCounterTable();
  const clock = options.clock ?? systemClock;
  const timer =
    options.sweepEveryMs === 0
      ? undefined
      : clock.every(options.sweepEveryMs ?? 1000, () =>
          counters.sweep(options.now(), SWEEP_PER_TICK),
        );

  return {
    healthy: () => true,
    slots: createMemorySlots(),
    commit(subject, slots, cost, force, nowMs) {
      counters.sweep(nowMs, SWEEP_PER_COUNT);
      const found = look(counters, subject, slots, nowMs);
      let room = true;
      for (let i = 0; i < slots.length; i++) {
        if (refuses(found[i]?.value ?? 0, false, cost, (slots[i] as Slot).limit)) room = false;
      }
      if (!room && !force) return report(where, slots, found, false, nowMs);
      for (let i = 0; i < slots.length; i++) {
        const counter = found[i];
        if (counter === undefined) {
          const slot = slots[i] as Slot;
          found[i] = counters.create(slot.name, subject, cost, slotEnd(slot, nowMs));
        } else {
          counter.value += cost;
        }
      }
      return report(where, slots, found, true, nowMs);
    },
    read(subject, slots, nowMs) {
      return report(where, slots, look(counters, subject, slots, nowMs), false, nowMs);
    },
    takeBack(subject, slots, points, _where, nowMs) {
      for (const counter of look(counters, subject, slots, nowMs)) {
        if (counter !== undefined) counter.value = Math.max(0, counter.value - points);
      }
      return Promise.resolve();
    },
    reset(subject, slots) {
      for (const slot of slots) counters.remove(slot.name, subject);
      return Promise.resolve();
    },
    save(nowMs) {
      const saved: SavedCounter[] = [];
      for (const { slot, subject, value, endsAt } of counters.all()) {
        if (endsAt > nowMs) saved.push({ key: `${slot}|${subject}`, value, endsAt });
      }
      return saved;
    },
    restore(saved, nowMs) {
      for (const { key, value, endsAt } of saved) {
        // Counter names never hold `|` (plan, client and limit names cannot), subjects may.
        const bar = key.indexOf("|");
        const slot = key.slice(0, bar);
        const subject = key.slice(bar + 1);
        if (bar > 0 && endsAt > nowMs && counters.live(slot, subject, nowMs) === undefined) {
          counters.create(slot, subject, value, endsAt);
        }
      }
    },
    footprint: () => counters.footprint(),
    sweep: (nowMs) => counters.sweep(nowMs, Number.POSITIVE_INFINITY),
    close: () => timer?.cancel(),
  };
}
