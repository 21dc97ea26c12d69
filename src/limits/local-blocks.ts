/**
 * A replica's record of the subjects that Redis refused, so that a client refused until T is
 * refused here until T without asking Redis again (envoyproxy/ratelimit keeps a local cache of
 * over-limit keys for the same reason): a client hammering past its limit costs Redis nothing.
 * Counts within a window only grow, so what Redis reported is a floor, and a refusal computed
 * from it is one Redis would give too. Bounded: the oldest record goes when the table is full.
 */
import { refuses, slotEnd, type Counted, type Slot } from "./counters.js";

/** Records kept at most; beyond, the oldest is dropped (it only costs one Redis call later). */
const MAX_RECORDS = 10_000;

interface Remembered {
  /** The slots the refusal was for; another array (a reload, a new period) voids the record. */
  readonly slots: readonly Slot[];
  readonly counted: Counted;
}

/** The refusals of one Redis store. */
export interface LocalBlocks {
  /** A refusal from the record, or undefined when Redis must be asked. */
  check(subject: string, slots: readonly Slot[], cost: number, nowMs: number): Counted | undefined;
  /** Keeps what Redis answered to a refused batch. */
  record(subject: string, slots: readonly Slot[], counted: Counted): void;
  /** Forgets a subject (its counters were reset). */
  forget(subject: string): void;
}

/** Creates an empty record. */
export function createLocalBlocks(): LocalBlocks {
  const records = new Map<string, Remembered>();
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
    record(subject, slots, counted) {
      records.delete(subject);
      if (records.size >= MAX_RECORDS) {
        const oldest = records.keys().next();
        if (oldest.done !== true) records.delete(oldest.value);
      }
      records.set(subject, { slots, counted });
    },
    forget(subject) {
      records.delete(subject);
    },
  };
}
