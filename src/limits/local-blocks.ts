/**
 * A replica's record of the subjects that Redis refused, so that a client refused until T is
 * refused here until T without asking Redis again (envoyproxy/ratelimit keeps a local cache of
 * over-limit keys for the same reason): a client hammering past its limit costs Redis nothing.
 * Counts within a window only grow, so what Redis reported is a floor, and a refusal computed
 * from it is one Redis would give too. Bounded: the oldest record goes when the table is full,
 * and a record goes once the windows that refused have ended, swept in the background from a
 * heap ordered by that end (end-heap.ts), so a client that never comes back leaves nothing.
 */
import type { Clock } from "../clock.js";
import { refuses, slotEnd, type Counted, type Slot } from "./counters.js";
import { createEndHeap } from "./end-heap.js";

/** Records kept at most; beyond, the oldest is dropped (it only costs one Redis call later). */
const MAX_RECORDS = 10_000;

// How often records whose refusing windows have ended are swept; a tick takes them all, as the
// table never holds more than MAX_RECORDS live ones.
const SWEEP_EVERY_MS = 1000;

interface Remembered {
  readonly subject: string;
  /** The slots the refusal was for; another array (a reload, a new period) voids the record. */
  readonly slots: readonly Slot[];
  readonly counted: Counted;
  /** When the last window that refused ends: the record can refuse nothing after. */
  readonly endsAt: number;
}

/** The refusals of one Redis store. */
export interface LocalBlocks {
  /** A refusal from the record, or undefined when Redis must be asked. */
  check(subject: string, slots: readonly Slot[], cost: number, nowMs: number): Counted | undefined;
  /** Keeps what Redis answered to a batch of `cost` points that it refused. */
  record(subject: string, slots: readonly Slot[], cost: number, counted: Counted): void;
  /** Forgets a subject (its counters were reset). */
  forget(subject: string): void;
  /** What is held: records, and entries waiting in the sweep's heap (replaced ones included). */
  footprint(): { readonly records: number; readonly pending: number };
  /** Stops the background sweep. */
  close(): void;
}

/** Creates an empty record, swept on `clock` at the time `now` reads (epoch milliseconds). */
export function createLocalBlocks(now: () => number, clock: Clock): LocalBlocks {
  const records = new Map<string, Remembered>();
  const heap = createEndHeap<Remembered>();
  const timer = clock.every(SWEEP_EVERY_MS, () =>
    heap.takeEnded(now(), Number.POSITIVE_INFINITY, (ended) => {
      if (records.get(ended.subject) === ended) records.delete(ended.subject);
    }),
  );
  return {
    check(subject, slots, cost, nowMs) {
      const record = records.get(subject);
      if (record === undefined) return undefined;
      const { counts, endsAt } = record.counted;
      let blocked = false;
      if (record.slots === slots) {
        for (let i = 0; i < slots.length; i++) {
          const slot = slots[i] as Slot;
          if ((endsAt[i] ?? 0) > nowMs && refuses(counts[i] ?? 0, false, cost, slot.limit)) {
            blocked = true;
          }
        }
      }
      if (!blocked) {
        records.delete(subject);
        return undefined;
      }
      // A window that has ended since starts again from nothing.
      const live = (i: number): boolean => (endsAt[i] ?? 0) > nowMs;
      return {
        added: false,
        counts: counts.map((count, i) => (live(i) ? count : 0)),
        endsAt: endsAt.map((end, i) => (live(i) ? end : slotEnd(slots[i] as Slot, nowMs))),
        where: "store",
        local: true,
      };
    },
    record(subject, slots, cost, counted) {
      records.delete(subject);
      if (records.size >= MAX_RECORDS) {
        const oldest = records.keys().next();
        if (oldest.done !== true) records.delete(oldest.value);
      }
      let endsAt = 0;
      counted.counts.forEach((count, i) => {
        if (refuses(count, false, cost, (slots[i] as Slot).limit)) {
          endsAt = Math.max(endsAt, counted.endsAt[i] ?? 0);
        }
      });
      const remembered: Remembered = { subject, slots, counted, endsAt };
      records.set(subject, remembered);
      heap.push(remembered);
    },
    forget(subject) {
      records.delete(subject);
    },
    footprint: () => ({ records: records.size, pending: heap.length }),
    close: () => timer.cancel(),
  };
}
