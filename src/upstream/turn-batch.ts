/**
 * Work gathered during one turn of the event loop and done together at its end (setImmediate,
 * after every socket that was readable in the turn has been read).
 *
 * Used for the upstream requests: on loopback, which is how a sidecar reaches its upstream, a
 * socket write runs the receiving end's TCP path, wake-up included, in the writer's system call.
 * A request written in the turn that read it wakes the upstream once per request; requests
 * written back to back find it awake and cost the writer less. Counting in Redis did this by
 * accident (the requests its reply decides are forwarded in one turn), and measured cheaper
 * than counting in memory, whose requests were each forwarded as soon as they were read.
 */

/** Queues `item` for `run` at the end of the current turn. */
export type TurnBatch<T> = (item: T) => void;

/**
 * Creates a batch that calls `run` on each queued item, in order, once per turn. An item whose
 * `run` throws goes to `failed`, and the rest still run: nothing up the stack would catch it.
 */
export function createTurnBatch<T>(
  run: (item: T) => void,
  failed: (item: T, error: unknown) => void,
): TurnBatch<T> {
  let queued: T[] = [];
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    const items = queued;
    queued = [];
    for (const item of items) {
      try {
        run(item);
      } catch (error) {
        failed(item, error);
      }
    }
  };
  return (item) => {
    queued.push(item);
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };
}
