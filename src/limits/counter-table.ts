/**
 * The memory store's counters: a table by slot and subject, and a heap of the same counters
 * ordered by their end (end-heap.ts), from which ended counters are swept in bounded steps so
 * that their memory is given back.
 */
import { createEndHeap } from "./end-heap.js";

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
  /** What the table holds; see TableFootprint. */
  footprint(): TableFootprint;
}

/** What a table holds, ended counters not yet swept included. */
export interface TableFootprint {
  readonly counters: number;
  /** Slots with at least one counter: a slot's table goes with its last counter. */
  readonly slots: number;
  /** Entries waiting in the sweep's heap, those of replaced or removed counters included. */
  readonly pending: number;
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
  const heap = createEndHeap<Counter>();
  // A slot's table goes with its last counter: a quota names its period in its slot, so a table
  // kept empty would stay for every period that ever was.
  const forget = (slot: string, subject: string, only?: Counter): void => {
    const owner = tables.get(slot);
    if (owner === undefined || (only !== undefined && owner.get(subject) !== only)) return;
    owner.delete(subject);
    if (owner.size === 0) tables.delete(slot);
  };

  return {
    live(slot, subject, nowMs) {
      const counter = tables.get(slot)?.get(subject);
      return counter !== undefined && counter.endsAt > nowMs ? counter : undefined;
    },
    create(slot, subject, value, endsAt) {
      const counter: Counter = { slot, subject, value, endsAt };
      table(slot).set(subject, counter);
      heap.push(counter);
      return counter;
    },
    remove(slot, subject) {
      forget(slot, subject);
    },
    sweep(nowMs, budget) {
      heap.takeEnded(nowMs, budget, (ended) => forget(ended.slot, ended.subject, ended));
    },
    *all() {
      for (const owner of tables.values()) yield* owner.values();
    },
    footprint: () => ({
      counters: [...tables.values()].reduce((total, owner) => total + owner.size, 0),
      slots: tables.size,
      pending: heap.length,
    }),
  };
}
