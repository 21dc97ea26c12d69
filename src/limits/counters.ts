/**
 * The seam between the limits and where their counters live. A request's limits are counted as
 * one batch: every counter of the batch has room for the request's points and all of them take
 * the points, or none does (a refused request consumes nothing, and nothing is refunded).
 * Counters are fixed windows: a counter starts with the first points it takes and ends `ttlMs`
 * later; a calendar quota names its period in the counter's name and lives until the period ends.
 */

/** One counter that a batch counts against. */
export interface Slot {
  /** The counter's name within its subject, e.g. `rate:plan:standard:burst:1000`. */
  readonly name: string;
  /** Points allowed while the counter lives. */
  readonly limit: number;
  /** How long a counter created now lives, in milliseconds. */
  readonly ttlMs: number;
  /** When set, a counter created at any time ends then (a calendar period's end), epoch ms. */
  readonly endsAt?: number;
}

/** When a counter of `slot` created at `nowMs` ends. */
export function slotEnd(slot: Slot, nowMs: number): number {
  return slot.endsAt ?? nowMs + slot.ttlMs;
}

/** Where a batch was counted: the store itself, or the Redis store's local fallback. */
export type Where = "store" | "fallback";

/** What a batch found, slot by slot, in the order of the slots. */
export interface Counted {
  /** Whether the points were added: every slot had room, or the batch was forced. */
  readonly added: boolean;
  /** Points in each counter: after this batch's when `added`, else as they were. */
  readonly counts: readonly number[];
  /** When each counter ends, epoch milliseconds. */
  readonly endsAt: readonly number[];
  readonly where: Where;
  /** True when no store was asked: a replica's own record of a refusal answered. */
  readonly local?: boolean;
}

/** A slot held for one open WebSocket connection (connection-slots.ts). */
export interface SlotLease {
  /** Gives the slot back; a second call does nothing. */
  release(): void;
}

/** What asking for a slot found: one held, none left, or a store that cannot tell. */
export type SlotOutcome = SlotLease | "full" | "unavailable";

/** The open connections' slots of one store. */
export interface ConnectionSlots {
  /** Takes one of the `limit` slots of `subject` at `nowMs` (epoch ms). */
  acquire(subject: string, limit: number, nowMs: number): Promise<SlotOutcome>;
  /** Stops renewing the leases held in Redis, which then end within their lifetime. */
  close(): void;
}

/** Counts batches for subjects (`client:<id>`, `ip:<address>`): the memory or the Redis store. */
export interface CounterStore {
  /**
   * Adds `cost` to every slot of `subject` when each has room for it (`force`: in any case, for
   * dry runs and counted failures), atomically; at once in memory, as a promise elsewhere.
   */
  commit(
    subject: string,
    slots: readonly Slot[],
    cost: number,
    force: boolean,
    nowMs: number,
  ): Counted | Promise<Counted>;
  /**
   * Reads the slots without adding anything; `forRequest` false (the admin API) is not counted
   * among the round trips made for requests.
   */
  read(
    subject: string,
    slots: readonly Slot[],
    nowMs: number,
    forRequest?: boolean,
  ): Counted | Promise<Counted>;
  /**
   * Takes `points` back from counters that `where` counted (a client that authenticated after
   * its attempt was counted); never moves them to another place, and never revives an ended one.
   */
  takeBack(
    subject: string,
    slots: readonly Slot[],
    points: number,
    where: Where,
    nowMs: number,
  ): Promise<void>;
  /** Deletes every counter of `subject` named by `slots`, for every replica sharing the store. */
  reset(subject: string, slots: readonly Slot[]): Promise<void>;
  /** Whether the counters can be reached now (memory: always). */
  healthy(): boolean;
  /** What every replica sharing the store sees besides counters; only the Redis store has it. */
  readonly shared?: SharedMarks;
  /** Open WebSocket connections per client, in the store's reach (the process, or Redis's). */
  readonly slots: ConnectionSlots;
}

/**
 * Marks shared by the replicas of one Redis store, each bounded by its end: ids accepted once
 * (assertion `jti`s) and revoked ids (access-token `jti`s). Each call fails when Redis cannot be
 * reached, and the caller follows `on_outage`.
 */
export interface SharedMarks {
  /** Marks `id` for `subject` until `untilMs` unless it is marked already; true when marked now. */
  markOnce(subject: string, id: string, untilMs: number, nowMs: number): Promise<boolean>;
  /**
   * Adds `id`, revoked by `subject`, to the revoked ids until `untilMs`, unless `subject` already
   * holds `most` revoked ids still in force; true when added (or already there).
   */
  revoke(
    subject: string,
    id: string,
    untilMs: number,
    nowMs: number,
    most: number,
  ): Promise<boolean>;
  /** Every revoked id whose end is after `nowMs`, with its end (epoch ms). */
  revoked(nowMs: number): Promise<ReadonlyMap<string, number>>;
}

/**
 * Whether a counter refuses `cost` more points: `count` is what the store reported for it, which
 * includes the cost when the batch was `added` (then this tells whether a dry run would refuse).
 */
export function refuses(count: number, added: boolean, cost: number, limit: number): boolean {
  return (added ? count : count + cost) > limit;
}
