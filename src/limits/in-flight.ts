/**
 * The calls written on one connection and waiting for their replies, in the order they were
 * written, so that each reply goes to its call. Every call fails at its deadline (one timer for
 * the oldest, not one per call) but keeps its place, so the replies that come after still match.
 */
import type { Clock, Timer } from "../clock.js";
import type { Reply, ScriptCall } from "./resp.js";

/** A call waiting for its reply. */
export interface Call {
  /** What was sent after the script, kept to send the call again in another form. */
  readonly script: ScriptCall;
  readonly deadline: number;
  /** Cleared once the call has its outcome. */
  resolve: ((reply: Reply) => void) | undefined;
  reject: ((error: Error) => void) | undefined;
}

/** Gives `call` its outcome, unless it already has one. */
export function settle(call: Call, outcome: Reply | Error): void {
  const { resolve, reject } = call;
  call.resolve = undefined;
  call.reject = undefined;
  if (outcome instanceof Error) reject?.(outcome);
  else resolve?.(outcome);
}

// Taken calls are dropped from the front of the list in batches, not one by one.
const COMPACT_AFTER = 1024;

/** Calls in write order; each fails with `timedOut()` when the clock passes its deadline. */
export class InFlight {
  #calls: Array<Call | undefined> = [];
  // The first call still waiting for its reply.
  #head = 0;
  // The first call whose deadline has not been checked yet.
  #watched = 0;
  #watch: Timer | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly timedOut: () => Error,
  ) {}

  /** Adds a call written after every call already here (its deadline no earlier than theirs). */
  push(call: Call): void {
    this.#calls.push(call);
    this.#arm();
  }

  /** The oldest call, taken off for its reply; undefined when no call waits. */
  take(): Call | undefined {
    const call = this.#calls[this.#head];
    if (call === undefined) return undefined;
    this.#calls[this.#head++] = undefined;
    if (this.#head >= COMPACT_AFTER && this.#head * 2 >= this.#calls.length) {
      this.#calls = this.#calls.slice(this.#head);
      this.#watched = Math.max(0, this.#watched - this.#head);
      this.#head = 0;
    }
    return call;
  }

  /** Fails every call still waiting with `error` and empties the list. */
  failAll(error: Error): void {
    this.#watch?.cancel();
    this.#watch = undefined;
    const calls = this.#calls;
    const from = this.#head;
    this.#calls = [];
    this.#head = 0;
    this.#watched = 0;
    for (let i = from; i < calls.length; i++) settle(calls[i] as Call, error);
  }

  #arm(): void {
    this.#watched = Math.max(this.#watched, this.#head);
    const first = this.#calls[this.#watched];
    if (this.#watch !== undefined || first === undefined) return;
    const wait = Math.max(0, first.deadline - this.clock.monotonic());
    this.#watch = this.clock.after(wait, () => this.#expire());
  }

  #expire(): void {
    this.#watch = undefined;
    const now = this.clock.monotonic();
    this.#watched = Math.max(this.#watched, this.#head);
    for (let call = this.#calls[this.#watched]; call !== undefined;) {
      if (call.deadline > now) break;
      settle(call, this.timedOut());
      call = this.#calls[++this.#watched];
    }
    this.#arm();
  }
}
