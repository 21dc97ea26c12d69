import t from "tap";
import { setImmediate as nextTurn } from "node:timers/promises";
import { createTurnBatch } from "../src/upstream/turn-batch.js";

t.test(
  "items queued in one turn run together, in order, once the turn's I/O is done",
  async (t) => {
    const ran: string[] = [];
    const send = createTurnBatch<string>(
      (item) => ran.push(item),
      () => t.fail("nothing throws"),
    );
    send("a");
    send("b");
    // Promise callbacks of the same turn (a Redis reply deciding several requests) join the batch.
    await Promise.resolve();
    send("c");
    t.strictSame(ran, [], "nothing runs in the turn that queued it");
    await nextTurn();
    t.strictSame(ran, ["a", "b", "c"]);
    send("d");
    await nextTurn();
    t.strictSame(ran, ["a", "b", "c", "d"], "a later turn is a batch of its own");
  },
);

t.test("an item that throws goes to the failure callback and the rest still run", async (t) => {
  const ran: number[] = [];
  const failures: Array<[number, string]> = [];
  const send = createTurnBatch<number>(
    (item) => {
      if (item === 2) throw new Error("cannot send 2");
      ran.push(item);
    },
    (item, error) => failures.push([item, (error as Error).message]),
  );
  for (const item of [1, 2, 3]) send(item);
  await nextTurn();
  t.strictSame(ran, [1, 3]);
  t.strictSame(failures, [[2, "cannot send 2"]]);
});
