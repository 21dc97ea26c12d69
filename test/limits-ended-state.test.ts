import t from "tap";
import type { Counted, Slot } from "../src/limits/counters.js";
import { preparePlan } from "../src/limits/enforce.js";
import { createLocalBlocks } from "../src/limits/local-blocks.js";
import { createMemoryStore } from "../src/limits/memory-store.js";
import { manualClock } from "./helpers/clock.js";

// Counter state that has ended is given back: nothing kept per quota period, window or subject
// outlives the period it was for, however many periods and subjects have come and gone.
const START = Date.UTC(2026, 2, 31, 22, 0, 0);
const HOUR = 3_600_000;
const SUBJECTS = 300;

t.test("memory store: counters and per-period tables go once their periods end", async (t) => {
  const clock = manualClock();
  const now = (): number => START + clock.monotonic();
  const store = createMemoryStore({ now, clock });
  const hourly = preparePlan({
    name: "p",
    connections: undefined,
    rates: [
      {
        name: "burst",
        slot: { name: "rate:plan:p:burst:10000", limit: 5, ttlMs: 10_000 },
        limit: 5,
        limitText: "5",
        window: "10s",
      },
    ],
    quota: { counterName: "quota:plan:p:hour", limit: 100, limitText: "100", period: "hour" },
  });
  // Four hours, each crossing into a new day's or month's boundary on the way (22:00 on 31 March
  // UTC to 02:00 on 1 April), every subject counted in each.
  for (let hour = 0; hour < 4; hour++) {
    for (let i = 0; i < SUBJECTS; i++) {
      const at = now();
      t.equal(store.commit(`client:${i}`, hourly.slots(at), 1, false, at).added, true);
    }
    t.match(
      store.footprint(),
      { counters: 2 * SUBJECTS, slots: 2 },
      `hour ${hour}: the live window and this hour's quota, nothing of the hours before`,
    );
    clock.advance(HOUR);
  }
  t.strictSame(
    store.footprint(),
    { counters: 0, slots: 0, pending: 0 },
    "once the last period ends, the background sweep leaves nothing",
  );
  store.close();
});

t.test("memory store: a reset counter's table goes with it", async (t) => {
  const store = createMemoryStore({ now: () => START, sweepEveryMs: 0 });
  const quota: Slot = {
    name: `quota:client:a:day@${START}`,
    limit: 5,
    ttlMs: HOUR,
    endsAt: START + HOUR,
  };
  store.commit("client:a", [quota], 1, false, START);
  await store.reset("client:a", [quota]);
  t.match(store.footprint(), { counters: 0, slots: 0 });
  store.sweep(START + HOUR);
  t.equal(store.footprint().pending, 0, "its heap entry goes when its period ends");
});

function refusal(counts: number[], endsAt: number[]): Counted {
  return { added: false, counts, endsAt, where: "store" };
}

t.test("local blocks: a record goes once the windows that refused have ended", async (t) => {
  const clock = manualClock();
  const now = (): number => START + clock.monotonic();
  const blocks = createLocalBlocks(now, clock);
  const rate: Slot = { name: "rate:plan:p:burst:10000", limit: 5, ttlMs: 10_000 };
  const quota: Slot = {
    name: "quota:plan:p:hour@0",
    limit: 100,
    ttlMs: HOUR,
    endsAt: START + HOUR,
  };
  const slots = [rate, quota];
  // Half the subjects refused by the 10-second window, half by the hour's quota.
  for (let i = 0; i < SUBJECTS; i++) {
    const byRate = i % 2 === 0;
    const counts = byRate ? [5, 40] : [2, 100];
    blocks.record(`client:${i}`, slots, 1, refusal(counts, [START + 10_000, START + HOUR]));
  }
  t.same(blocks.footprint(), { records: SUBJECTS, pending: SUBJECTS });
  t.equal(blocks.check("client:0", slots, 1, now())?.added, false, "a record refuses locally");
  clock.advance(10_000);
  t.same(
    blocks.footprint(),
    { records: SUBJECTS / 2, pending: SUBJECTS / 2 },
    "the window's refusals are gone, the quota's kept",
  );
  t.equal(blocks.check("client:1", slots, 1, now())?.added, false, "the quota still refuses");
  clock.advance(HOUR);
  t.same(blocks.footprint(), { records: 0, pending: 0 }, "nothing is left");
  blocks.close();
});

t.test("local blocks: a replaced record's heap entry goes at its own end", async (t) => {
  const clock = manualClock();
  const now = (): number => START + clock.monotonic();
  const blocks = createLocalBlocks(now, clock);
  const rate: Slot = { name: "rate:plan:p:burst:10000", limit: 5, ttlMs: 10_000 };
  blocks.record("client:a", [rate], 1, refusal([5], [START + 10_000]));
  clock.advance(10_000);
  blocks.record("client:a", [rate], 1, refusal([5], [START + 20_000]));
  blocks.forget("client:a");
  t.same(blocks.footprint(), { records: 0, pending: 1 });
  clock.advance(10_000);
  t.same(blocks.footprint(), { records: 0, pending: 0 });
  blocks.close();
});
