/**
 * Holds one of Node's tick records (what `process.nextTick` queues, several per request) for the
 * life of the process. V8 gives objects built alike one hidden class and lets the class go once no
 * object of it is alive; a tick record lives for microseconds, so a full garbage collection at a
 * quiet moment can drop the class, the next records get a new one, and the code that builds them,
 * having seen several, stays on a slow generic path. That is the likely cause of what CPU profiles
 * of the bench showed on Node 20: `nextTick` took 0.6-0.8% of a busy process's CPU in some
 * processes and 4.3-7.8% in others of the same build (about 12 µs a request), at random from one
 * start to the next; with a record held, every process stayed at the low figure.
 */
import { executionAsyncResource } from "node:async_hooks";

let held: object | undefined;

/** The record held, once the first tick has run. */
export function heldTick(): object | undefined {
  return held;
}

/** Keeps the tick record's hidden class alive; once per process, before traffic. */
export function holdTickShape(): void {
  if (held !== undefined) return;
  // Inside a tick's callback, the tick's record is the resource being executed.
  process.nextTick(() => {
    held = executionAsyncResource();
  });
}
