/**
 * The process's own clock waits as long as it is asked to: a Node timer holds at most 2^31-1 ms
 * (24.8 days) and fires after 1 ms when given more, so a longer wait is a chain of timers.
 */
import t from "tap";
import { MAX_TIMER_MS, systemClock } from "../src/clock.js";

const DAY_MS = 86_400_000;

t.test("a wait of 40 days has not ended after a short one", async (t) => {
  let fired = false;
  const timer = systemClock.after(40 * DAY_MS, () => (fired = true));
  await new Promise((done) => setTimeout(done, 200));
  t.equal(fired, false, "not fired");
  timer.cancel();
});

/** A timer set while `step` ran: what it runs, and after how long. */
interface Set {
  readonly run: () => void;
  readonly ms: number;
}

/** Runs `step` with Node's setTimeout recording, not setting, the timers asked for. */
function recording(step: () => void): Set[] {
  const sets: Set[] = [];
  const real = globalThis.setTimeout;
  globalThis.setTimeout = ((run: () => void, ms: number) => {
    sets.push({ run, ms });
    return { unref: () => undefined };
  }) as unknown as typeof setTimeout;
  try {
    step();
  } finally {
    globalThis.setTimeout = real;
  }
  return sets;
}

t.test("a wait of 40 days is timers Node holds, the last ending at its due time", (t) => {
  let fired = false;
  const [first] = recording(() => systemClock.after(40 * DAY_MS, () => (fired = true)));
  t.equal(first?.ms, MAX_TIMER_MS, "the first timer is the longest Node holds");
  const [second] = recording(() => first?.run());
  t.equal(fired, false, "not fired when the first timer ends");
  t.equal(second?.ms, 40 * DAY_MS - MAX_TIMER_MS, "the second waits for the rest");
  t.same(
    recording(() => second?.run()),
    [],
    "no third timer",
  );
  t.equal(fired, true, "fired when the last one ends");
  t.end();
});

t.test("a wait Node holds is one timer", (t) => {
  const sets = recording(() => systemClock.after(MAX_TIMER_MS, () => undefined));
  t.same(
    sets.map((set) => set.ms),
    [MAX_TIMER_MS],
  );
  t.end();
});
