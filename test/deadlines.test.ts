/** One timer for many deadlines (src/upstream/deadlines.ts), on a clock the tests move. */
import t from "tap";
import { createDeadlines, type Timed } from "../src/upstream/deadlines.js";
import { manualClock } from "./helpers/clock.js";

const clock = manualClock();

interface Item extends Timed {
  readonly name: string;
}

function item(name: string, inMs: number): Item {
  return { name, deadline: clock.monotonic() + inMs, slot: -1 };
}

t.test("each item whose deadline passes is expired once; removed ones never", async (t) => {
  const expired: string[] = [];
  const deadlines = createDeadlines<Item>((item) => expired.push(item.name), clock);
  const early = item("early", 20);
  const late = item("late", 120);
  const removed = item("removed", 20);
  for (const each of [late, early, removed]) deadlines.add(each);
  deadlines.remove(removed);
  clock.advance(70);
  t.strictSame(expired, ["early"], "the earliest first, the later one still pending");
  clock.advance(120);
  t.strictSame(expired, ["early", "late"], "then the later one, after the first sweep re-armed");
});

t.test("a deadline moved later is honoured", async (t) => {
  const expired: Item[] = [];
  const deadlines = createDeadlines<Item>((item) => expired.push(item), clock);
  const upload = item("upload", 30);
  deadlines.add(upload);
  clock.advance(15);
  upload.deadline = clock.monotonic() + 80;
  clock.advance(40);
  t.equal(expired.length, 0, "not expired at its first deadline");
  clock.advance(100);
  t.strictSame(expired, [upload], "expired at the moved one");
});

t.test("an item added with an earlier deadline re-arms the timer", async (t) => {
  const expired: string[] = [];
  const deadlines = createDeadlines<Item>((item) => expired.push(item.name), clock);
  deadlines.add(item("slow", 10_000));
  deadlines.add(item("fast", 20));
  clock.advance(80);
  t.strictSame(expired, ["fast"]);
});

t.test("removals from the middle leave every other item pending, each expired once", async (t) => {
  const expired: string[] = [];
  const deadlines = createDeadlines<Item>((each) => expired.push(each.name), clock);
  const items = Array.from({ length: 40 }, (_, i) => item(`item ${i}`, 20 + (i % 3)));
  for (const each of items) deadlines.add(each);
  const kept = items.filter((_, i) => i % 3 !== 1);
  for (const each of items) if (!kept.includes(each)) deadlines.remove(each);
  deadlines.remove(items[1] as Item);
  clock.advance(80);
  t.strictSame([...expired].sort(), kept.map((each) => each.name).sort(), "each kept item, once");
  t.ok(
    items.every((each) => each.slot === -1),
    "no item is pending afterwards",
  );
});

t.test("expiring an item may remove or add others; no item expires twice", async (t) => {
  const expired: string[] = [];
  const first = item("first", 20);
  const second = item("second", 20);
  const later = item("later", 60);
  const deadlines = createDeadlines<Item>((each) => {
    expired.push(each.name);
    deadlines.remove(each === first ? second : first);
    if (each.name !== "later") deadlines.add(later);
  }, clock);
  deadlines.add(first);
  deadlines.add(second);
  deadlines.add(first);
  clock.advance(120);
  t.equal(expired.filter((name) => name !== "later").length, 2, "both due items expired once");
  t.strictSame(
    expired.filter((name) => name === "later"),
    ["later"],
    "the added one expired once, later",
  );
});
