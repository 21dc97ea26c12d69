/**
 * Ids held in this process until each one's end: assertion `jti`s already used, and revoked
 * access-token `jti`s. No timer per id: ended ones are swept from a heap ordered by their end,
 * a few on every addition and all of them on an unref'd timer, so their memory is given back.
 */
import type { Clock } from "../clock.js";
import { createEndHeap } from "../limits/end-heap.js";

/** A set of ids, each held until its end. */
export interface EndingSet {
  /** Whether `id` is held and has not ended at `nowMs`. */
  has(id: string, nowMs: number): boolean;
  /**
   * Holds `id` until `untilMs` (a later end wins over an earlier one); true when `id` was not held
   * before (an ended one not yet swept is still held).
   */
  add(id: string, untilMs: number, nowMs: number): boolean;
  /** Gives back every id ended at `nowMs`. */
  sweep(nowMs: number): void;
  /** Every id that has not ended at `nowMs`, with its end. */
  live(nowMs: number): Array<{ readonly id: string; readonly endsAt: number }>;
  /** Ids held, ended ones not yet swept included. */
  readonly size: number;
  /** Stops the background sweep. */
  close(): void;
}

interface Held {
  readonly id: string;
  readonly endsAt: number;
}

const SWEEP_EVERY_MS = 1000;
// More than an addition can create, so the sweep keeps pace with any load.
const SWEEP_PER_ADD = 4;

/**
 * An empty set swept on `clock` at the time `now` reads; `ended` hears of each id given back.
 */
export function createEndingSet(
  now: () => number,
  clock: Clock,
  ended: (id: string) => void = () => undefined,
): EndingSet {
  const held = new Map<string, Held>();
  const heap = createEndHeap<Held>();
  const forget = (entry: Held): void => {
    if (held.get(entry.id) !== entry) return;
    held.delete(entry.id);
    ended(entry.id);
  };
  const sweep = (nowMs: number): void => heap.takeEnded(nowMs, Number.POSITIVE_INFINITY, forget);
  const timer = clock.every(SWEEP_EVERY_MS, () => sweep(now()));
  return {
    has(id, nowMs) {
      const entry = held.get(id);
      return entry !== undefined && entry.endsAt > nowMs;
    },
    add(id, untilMs, nowMs) {
      heap.takeEnded(nowMs, SWEEP_PER_ADD, forget);
      const entry = held.get(id);
      if (entry !== undefined && entry.endsAt >= untilMs) return false;
      const next: Held = { id, endsAt: untilMs };
      held.set(id, next);
      heap.push(next);
      return entry === undefined;
    },
    sweep,
    live(nowMs) {
      const found: Array<{ readonly id: string; readonly endsAt: number }> = [];
      for (const entry of held.values()) if (entry.endsAt > nowMs) found.push(entry);
      return found;
    },
    get size() {
      return held.size;
    },
    close: () => timer.cancel(),
  };
}
