/** One timer for many deadlines (src/upstream/deadlines.ts). */
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import t from "tap";
import { createDeadlines, type Timed } from "../src/upstream/deadlines.js";

interface Item extends Timed {
  readonly name: string;
}

t.test("each item whose deadline passes is expired once; removed ones never", async (t) => {
  const expired: string[] = [];
  const deadlines = createDeadlines<Item>((item) => expired.push(item.name));
  const now = performance.now();
  const early = { name: "early", deadline: now + 20 };
  const late = { name: "late", deadline: now + 120 };
  const removed = { name: "removed", deadline: now + 20 };
  for (const item of [late, early, removed]) deadlines.add(item);
  deadlines.remove(removed);
  await sleep(70);
  t.strictSame(expired, ["early"], "the earliest first, the later one still pending");
  await sleep(120);
  t.strictSame(expired, ["early", "late"], "then the later one, after the first sweep re-armed");
});

t.test("a deadline moved later is honoured", async (t) => {
  const expired: Item[] = [];
  const deadlines = createDeadlines<Item>((item) => expired.push(item));
  const item = { name: "upload", deadline: performance.now() + 30 };
  deadlines.add(item);
  await sleep(15);
  item.deadline = performance.now() + 80;
  await sleep(40);
  t.equal(expired.length, 0, "not expired at its first deadline");
  await sleep(100);
  t.strictSame(expired, [item], "expired at the moved one");
});

t.test("an item added with an earlier deadline re-arms the timer", async (t) => {
  const expired: string[] = [];
  const deadlines = createDeadlines<Item>((item) => expired.push(item.name));
  deadlines.add({ name: "slow", deadline: performance.now() + 10_000 });
  deadlines.add({ name: "fast", deadline: performance.now() + 20 });
  await sleep(80);
  t.strictSame(expired, ["fast"]);
});
