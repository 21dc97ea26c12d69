/**
 * Open WebSocket connections per client (`plans.<name>.connections`): a slot is taken when a
 * handshake is let through and given back when its connection ends. Here, a count per subject in
 * the process; redis-slots.ts shares them through Redis.
 */
import type { ConnectionSlots, SlotLease } from "./counters.js";

/** A lease that holds nothing: the store could not count it, and `on_outage: open` lets it be. */
export const UNCOUNTED: SlotLease = Object.freeze({ release: () => undefined });

/** Slots counted in this process. */
export function createMemorySlots(): ConnectionSlots {
  const held = new Map<string, number>();
  return {
    async acquire(subject, limit) {
      const now = held.get(subject) ?? 0;
      if (now >= limit) return "full";
      held.set(subject, now + 1);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          const left = (held.get(subject) ?? 1) - 1;
          if (left <= 0) held.delete(subject);
          else held.set(subject, left);
        },
      };
    },
    close: () => undefined,
  };
}
