import t from "tap";
import { addressKey } from "../src/limits/client-key.js";
import type { Counted } from "../src/limits/counters.js";
import { decide } from "../src/limits/decide.js";
import { preparePlan } from "../src/limits/enforce.js";
import { renderDecision, type HeaderStyle } from "../src/limits/headers.js";
import { createMemoryStore } from "../src/limits/memory-store.js";
import type { Plan, QuotaRule, RateRule } from "../src/limits/plans.js";
import { createPeriodClock, periodAt } from "../src/limits/windows.js";
import { manualClock } from "./helpers/clock.js";

function rateRule(name: string, limit: number, window: string, windowMs: number): RateRule {
  return {
    name,
    slot: { name: `rate:plan:p:${name}:${windowMs}`, limit, ttlMs: windowMs },
    limit,
    limitText: String(limit),
    window,
  };
}
const rate = rateRule("default", 5, "1m", 60_000);
const quota: QuotaRule = {
  counterName: "quota:plan:p:day",
  limit: 10,
  limitText: "10",
  period: "day",
};
const NOW = Date.UTC(2026, 2, 31, 23, 59, 30);
const X_RATELIMIT: HeaderStyle = { reset: "seconds", xRateLimit: true, ietf: false };
const plan = (rates: RateRule[], withQuota = true): Plan => ({
  name: "p",
  connections: undefined,
  rates,
  quota: withQuota ? quota : undefined,
});

/** What a store reports: counts and ends, in the plan's order (rate limits, then the quota). */
function counted(added: boolean, ...slots: Array<[number, number]>): Counted {
  return {
    added,
    counts: slots.map(([count]) => count),
    endsAt: slots.map(([, end]) => end),
    where: "store",
  };
}

t.test("addressKey folds mapped IPv4 and groups IPv6 by /64", async (t) => {
  const cases: Array<[string, string]> = [
    ["203.0.113.7", "ip:203.0.113.7"],
    ["::ffff:203.0.113.7", "ip:203.0.113.7"],
    ["::ffff:cb00:7107", "ip:203.0.113.7"],
    ["2001:db8:1:2::1", "ip:2001:db8:1:2::/64"],
    ["2001:0DB8:0001:0002:ffff:ffff:ffff:ffff", "ip:2001:db8:1:2::/64"],
    ["2001:db8:1:3::1", "ip:2001:db8:1:3::/64"],
    ["fe80::1%eth0", "ip:fe80:0:0:0::/64"],
    ["::1", "ip:0:0:0:0::/64"],
    ["2001:db8::", "ip:2001:db8:0:0::/64"],
  ];
  for (const [address, key] of cases) t.equal(addressKey(address), key, address);
});

t.test("periodAt follows the UTC calendar", async (t) => {
  t.strictSame(periodAt("hour", Date.UTC(2026, 0, 1, 10, 30)), {
    startMs: Date.UTC(2026, 0, 1, 10),
    endMs: Date.UTC(2026, 0, 1, 11),
    id: String(Date.UTC(2026, 0, 1, 10)),
  });
  t.equal(periodAt("day", NOW).endMs, Date.UTC(2026, 3, 1), "day ends at UTC midnight");
  t.equal(periodAt("month", Date.UTC(2026, 1, 14)).endMs, Date.UTC(2026, 2, 1), "February");
  t.equal(periodAt("month", Date.UTC(2026, 11, 31, 23)).endMs, Date.UTC(2027, 0, 1), "December");
  const clock = createPeriodClock("day");
  t.equal(clock(NOW).startMs, Date.UTC(2026, 2, 31));
  t.equal(clock(NOW + 30_000).startMs, Date.UTC(2026, 3, 1), "the clock moves at the boundary");
});

t.test("decide: within the limits", async (t) => {
  const d = decide(
    plan([rate]),
    counted(true, [2, NOW + 59_001], [7, Date.UTC(2026, 3, 1)]),
    1,
    NOW,
    false,
  );
  t.equal(d.allowed, true);
  t.equal(d.refusal, undefined);
  t.match(d.rate, { limitText: "5", remaining: 3, resetSeconds: 60, resetAt: 1775001630 });
  t.equal(d.quota?.remaining, 3);
  t.equal(d.quota?.resetSeconds, 30);
});

t.test("decide: a refusal for cost shows the points really left", async (t) => {
  const d = decide(plan([rate], false), counted(false, [4, NOW + 1500]), 2, NOW, false);
  t.equal(d.allowed, false);
  t.equal(d.refusal, "rate_limited");
  t.equal(d.rate?.remaining, 1, "4 were counted before; the refused 2 are not taken");
  t.equal(d.retryAfter, 2, "1.5 s rounds up");
  t.equal(d.window, "1m");
  t.equal(d.limit, 5);
  t.equal(d.policy, "default");
});

t.test("decide: Retry-After is never below 1", async (t) => {
  for (const ms of [0, -1, 1, 999]) {
    const d = decide(plan([rate], false), counted(false, [5, NOW + ms]), 1, NOW, false);
    t.equal(d.retryAfter, 1, `ends in ${ms} ms`);
    t.equal(d.rate?.resetSeconds, 1);
  }
});

t.test("decide: both refuse; the later reset names the error", async (t) => {
  const both = (rateMs: number) =>
    decide(plan([rate]), counted(false, [5, NOW + rateMs], [10, NOW + 30_000]), 1, NOW, false);
  const quotaLater = both(10_000);
  t.equal(quotaLater.refusal, "quota_exceeded");
  t.equal(quotaLater.retryAfter, 30);
  t.equal(quotaLater.window, "day");
  t.equal(quotaLater.limit, 10);
  t.equal(quotaLater.policy, "quota");
  const rateLater = both(45_000);
  t.equal(rateLater.refusal, "rate_limited");
  t.equal(rateLater.retryAfter, 45);
  t.equal(rateLater.quota?.remaining, 0, "the quota is used up and says so");
});

t.test("decide: quota refused, rate shows its points untaken", async (t) => {
  const d = decide(
    plan([rate]),
    counted(false, [2, NOW + 5000], [10, NOW + 30_000]),
    1,
    NOW,
    false,
  );
  t.equal(d.refusal, "quota_exceeded");
  t.equal(d.rate?.remaining, 3);
  t.equal(d.retryAfter, 30, "Retry-After comes from the quota");
});

t.test("decide: dry run never refuses but names the would-be refusal", async (t) => {
  const d = decide(plan([rate], false), counted(true, [9, NOW + 5000]), 1, NOW, true);
  t.equal(d.allowed, true);
  t.equal(d.refusal, "rate_limited");
  t.equal(d.rate?.remaining, 0, "never negative");
});

t.test("decide: several rate limits", async (t) => {
  const burst = rateRule("burst", 10, "1s", 1000);
  const sustained = rateRule("sustained", 600, "1h", 3_600_000);
  const both = plan([burst, sustained], false);
  const allowed = decide(
    both,
    counted(true, [3, NOW + 800], [595, NOW + 3_000_000]),
    1,
    NOW,
    false,
  );
  t.equal(allowed.rate?.name, "sustained", "the headers show the limit with the fewest left");
  t.equal(allowed.rate?.remaining, 5);
  t.strictSame(
    allowed.limits.map((state) => [state.name, state.remaining]),
    [
      ["burst", 7],
      ["sustained", 5],
    ],
    "every limit, in the plan's order",
  );
  const tie = decide(both, counted(true, [5, NOW + 800], [595, NOW + 3_000_000]), 1, NOW, false);
  t.equal(tie.rate?.name, "sustained", "on a tie, the one that resets later");
  const burstRefuses = decide(
    both,
    counted(false, [10, NOW + 800], [20, NOW + 9_000]),
    1,
    NOW,
    false,
  );
  t.equal(burstRefuses.refusal, "rate_limited");
  t.equal(burstRefuses.policy, "burst");
  t.equal(burstRefuses.rate?.name, "burst", "on a 429 the headers describe the refusing limit");
  t.equal(burstRefuses.retryAfter, 1);
  t.equal(burstRefuses.window, "1s");
  const bothRefuse = decide(
    both,
    counted(false, [10, NOW + 800], [600, NOW + 9_000]),
    1,
    NOW,
    false,
  );
  t.equal(bothRefuse.policy, "sustained", "several refuse: the later reset names it");
  t.equal(bothRefuse.retryAfter, 9);
  t.equal(bothRefuse.rate?.name, "sustained");
});

t.test("renderDecision writes headers once and the 429", async (t) => {
  const allowed = decide(
    plan([rate]),
    counted(true, [1, NOW + 60_000], [1, NOW + 30_000]),
    1,
    NOW,
    false,
  );
  const headers: Record<string, string> = {};
  t.equal(renderDecision(allowed, headers, X_RATELIMIT, ""), undefined);
  t.strictSame(headers, {
    "x-ratelimit-limit": "5",
    "x-ratelimit-remaining": "4",
    "x-ratelimit-reset": "60",
    "x-request-quota-limit": "10",
    "x-request-quota-limit-remaining": "9",
  });
  const unix: Record<string, string> = {};
  renderDecision(allowed, unix, { ...X_RATELIMIT, reset: "unix" }, "");
  t.equal(unix["x-ratelimit-reset"], String(Math.ceil((NOW + 60_000) / 1000)));

  const refused = decide(plan([rate], false), counted(false, [5, NOW + 7000]), 1, NOW, false);
  const onlyRate: Record<string, string> = {};
  const reply = renderDecision(refused, onlyRate, X_RATELIMIT, "");
  t.equal(onlyRate["x-request-quota-limit"], undefined, "no quota, no quota headers");
  t.strictSame(reply, {
    status: 429,
    headers: { "retry-after": "7", "cache-control": "no-store" },
    body: {
      error: "rate_limited",
      message: "the rate limit of 5 per 1m is used up; retry after 7 s",
      retry_after: 7,
      limit: 5,
      window: "1m",
      policy: "default",
    },
  });
});

const slot = (limit: number, ttlMs: number, name = "rate:plan:p:default") => ({
  name,
  limit,
  ttlMs,
});

t.test("memory store: a batch takes its points in every counter or in none", async (t) => {
  const store = createMemoryStore({ now: () => NOW, sweepEveryMs: 0 });
  const slots = [slot(10, 1000, "burst"), slot(3, 60_000, "sustained")];
  t.match(store.commit("client:a", slots, 2, false, NOW), { added: true, counts: [2, 2] });
  t.match(store.commit("client:a", slots, 2, false, NOW), {
    added: false,
    counts: [2, 2],
    endsAt: [NOW + 1000, NOW + 60_000],
  });
  t.match(store.read("client:a", slots, NOW), { counts: [2, 2] }, "the refusal took nothing");
  t.match(store.commit("client:a", slots, 1, false, NOW), { added: true, counts: [3, 3] });
  t.match(store.commit("client:a", slots, 1, true, NOW), { added: true, counts: [4, 4] }, "forced");
  t.match(store.commit("client:b", slots, 1, false, NOW), { counts: [1, 1] }, "subjects apart");
  t.match(
    store.commit("client:a", slots, 1, false, NOW + 1000),
    {
      added: false,
      counts: [0, 4],
      endsAt: [NOW + 2000, NOW + 60_000],
    },
    "an ended counter reads as empty",
  );
});

t.test("memory store: a changed limit keeps what was counted", async (t) => {
  const store = createMemoryStore({ now: () => NOW, sweepEveryMs: 0 });
  store.commit("client:a", [slot(5, 60_000)], 4, false, NOW);
  t.match(store.commit("client:a", [slot(8, 60_000)], 4, false, NOW), { added: true, counts: [8] });
  t.match(store.commit("client:a", [slot(2, 60_000)], 1, false, NOW), {
    added: false,
    counts: [8],
  });
});

t.test("memory store: takeBack never goes below zero or revives an ended counter", async (t) => {
  const store = createMemoryStore({ now: () => NOW, sweepEveryMs: 0 });
  const slots = [slot(5, 1000)];
  store.commit("ip:1.2.3.4", slots, 1, false, NOW);
  await store.takeBack("ip:1.2.3.4", slots, 3, "store", NOW);
  t.match(store.read("ip:1.2.3.4", slots, NOW), { counts: [0] });
  await store.takeBack("ip:1.2.3.5", slots, 1, "store", NOW);
  t.equal(store.footprint().counters, 1, "nothing created by a take-back");
  await store.reset("ip:1.2.3.4", slots);
  t.equal(store.footprint().counters, 0, "reset deletes");
});

// Node clamps timer delays over 2^31-1 ms (about 24.8 days) to 1 ms: no counter may rely on one.
const DAY = 86_400_000;
for (const days of [25, 30, 200, 366]) {
  t.test(`memory store: a ${days}-day window holds for its whole length`, async (t) => {
    let now = Date.UTC(2026, 0, 1);
    const clock = manualClock();
    const store = createMemoryStore({ now: () => now, sweepEveryMs: 10, clock });
    const slots = [slot(1, days * DAY)];
    t.match(store.commit("client:a", slots, 1, false, now), { added: true });
    // The background sweep runs meanwhile: no timer may end the counter early.
    clock.advance(50);
    for (const at of [1, DAY, (days - 1) * DAY, days * DAY - 1]) {
      now = Date.UTC(2026, 0, 1) + at;
      t.match(store.commit("client:a", slots, 1, false, now), { added: false }, `+${at} ms`);
    }
    now = Date.UTC(2026, 0, 1) + days * DAY;
    t.match(store.commit("client:a", slots, 1, false, now), { added: true }, "then a new window");
    store.close();
  });
}

t.test("memory store: a monthly quota holds on every day of the month", async (t) => {
  // 28, 29 (a leap year), 30 and 31 days.
  const months: Array<[number, number, number]> = [
    [2026, 1, 28],
    [2028, 1, 29],
    [2026, 3, 30],
    [2026, 0, 31],
    [2026, 11, 31],
  ];
  for (const [year, month, days] of months) {
    const monthly = preparePlan({
      name: "m",
      connections: undefined,
      rates: [],
      quota: { counterName: "quota:plan:m:month", limit: 1, limitText: "1", period: "month" },
    });
    const store = createMemoryStore({ now: () => 0, sweepEveryMs: 0 });
    const start = Date.UTC(year, month, 1);
    const first = store.commit("client:a", monthly.slots(start), 1, false, start);
    t.match(first, { added: true, endsAt: [Date.UTC(year, month + 1, 1)] }, `${year}-${month + 1}`);
    for (let day = 1; day <= days; day++) {
      const at = Date.UTC(year, month, day, 23, 59, 59, 999);
      const refused = store.commit("client:a", monthly.slots(at), 1, false, at);
      t.equal(refused.added, false, `${year}-${month + 1}-${day} is refused`);
    }
    const next = Date.UTC(year, month + 1, 1);
    t.equal(
      store.commit("client:a", monthly.slots(next), 1, false, next).added,
      true,
      "next month",
    );
  }
});

t.test("memory store: ended counters are swept and their memory given back", async (t) => {
  let now = NOW;
  const store = createMemoryStore({ now: () => now, sweepEveryMs: 0 });
  const slots = [slot(5, 1000), slot(5, 10 * DAY, "quota")];
  for (let i = 0; i < 1000; i++) store.commit(`client:${i}`, slots, 1, false, now);
  t.equal(store.footprint().counters, 2000);
  now += 1000;
  store.sweep(now);
  t.equal(store.footprint().counters, 1000, "the short windows are gone, the long ones kept");
  now += 10 * DAY;
  store.commit("client:new", [slot(5, 1000)], 1, false, now);
  t.ok(store.footprint().counters < 1000, "every count sweeps a few ended counters too");
  store.sweep(now);
  t.equal(store.footprint().counters, 1, "only the live counter is left");
});

t.test("memory store: saved counters come back with their ends; ended ones do not", async (t) => {
  const before = createMemoryStore({ now: () => NOW, sweepEveryMs: 0 });
  before.commit("ip:1.2.3.4", [slot(5, 1000)], 2, false, NOW);
  before.commit("ip:1.2.3.4", [slot(5, 30 * DAY, "quota")], 4, false, NOW);
  const saved = JSON.parse(JSON.stringify(before.save(NOW)));
  t.equal(saved.length, 2);
  const after = createMemoryStore({ now: () => NOW, sweepEveryMs: 0 });
  const later = NOW + 15 * DAY;
  after.restore(saved, later);
  t.equal(after.footprint().counters, 1, "the ended window is left out");
  t.match(after.read("ip:1.2.3.4", [slot(5, 30 * DAY, "quota")], later), {
    counts: [4],
    endsAt: [NOW + 30 * DAY],
  });
});
