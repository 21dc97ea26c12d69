import t from "tap";
import { addressKey } from "../src/limits/client-key.js";
import { decide, type DecisionInput } from "../src/limits/decide.js";
import { renderDecision } from "../src/limits/headers.js";
import type { QuotaRule, RateRule } from "../src/limits/plans.js";
import {
  addPoints,
  createMemoryStore,
  refundPoints,
  ruleFingerprint,
  type Count,
} from "../src/limits/store.js";
import { createPeriodClock, periodAt } from "../src/limits/windows.js";

const rate: RateRule = {
  counter: { name: "rate:plan:p", points: 5, durationMs: 60_000 },
  limit: 5,
  limitText: "5",
  window: "1m",
};
const quota: QuotaRule = {
  counter: { name: "quota:plan:p:day", points: 10, durationMs: 86_400_000 },
  limit: 10,
  limitText: "10",
  period: "day",
};
const NOW = Date.UTC(2026, 2, 31, 23, 59, 30);

function input(overrides: Partial<DecisionInput>): DecisionInput {
  return { rate: undefined, quota: undefined, cost: 1, nowMs: NOW, dryRun: false, ...overrides };
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
    input({
      rate: { rule: rate, count: { consumed: 2, msBeforeNext: 59_001 } },
      quota: { rule: quota, count: { consumed: 7, msBeforeNext: 0 }, endMs: Date.UTC(2026, 3, 1) },
    }),
  );
  t.equal(d.allowed, true);
  t.equal(d.refusal, undefined);
  t.strictSame(d.rate, { limitText: "5", remaining: 3, resetSeconds: 60, resetAt: 1775001630 });
  t.equal(d.quota?.remaining, 3);
  t.equal(d.quota?.resetSeconds, 30);
});

t.test("decide: a refusal for cost shows the points really left", async (t) => {
  const d = decide(
    input({ cost: 2, rate: { rule: rate, count: { consumed: 6, msBeforeNext: 1500 } } }),
  );
  t.equal(d.allowed, false);
  t.equal(d.refusal, "rate_limited");
  t.equal(d.rate?.remaining, 1, "4 were counted before; the refused 2 are not taken");
  t.equal(d.retryAfter, 2, "1.5 s rounds up");
  t.equal(d.window, "1m");
  t.equal(d.limit, 5);
});

t.test("decide: Retry-After is never below 1", async (t) => {
  for (const ms of [0, -1, 1, 999]) {
    const d = decide(input({ rate: { rule: rate, count: { consumed: 6, msBeforeNext: ms } } }));
    t.equal(d.retryAfter, 1, `msBeforeNext ${ms}`);
    t.equal(d.rate?.resetSeconds, 1);
  }
});

t.test("decide: both refuse; the later reset names the error", async (t) => {
  const both = (rateMs: number) =>
    decide(
      input({
        rate: { rule: rate, count: { consumed: 6, msBeforeNext: rateMs } },
        quota: { rule: quota, count: { consumed: 11, msBeforeNext: 0 }, endMs: NOW + 30_000 },
      }),
    );
  const quotaLater = both(10_000);
  t.equal(quotaLater.refusal, "quota_exceeded");
  t.equal(quotaLater.retryAfter, 30);
  t.equal(quotaLater.window, "day");
  t.equal(quotaLater.limit, 10);
  const rateLater = both(45_000);
  t.equal(rateLater.refusal, "rate_limited");
  t.equal(rateLater.retryAfter, 45);
  t.equal(rateLater.quota?.remaining, 0, "the quota is used up and says so");
});

t.test("decide: quota refused, rate shows its points untaken", async (t) => {
  const d = decide(
    input({
      rate: { rule: rate, count: { consumed: 3, msBeforeNext: 5000 } },
      quota: { rule: quota, count: { consumed: 11, msBeforeNext: 0 }, endMs: NOW + 30_000 },
    }),
  );
  t.equal(d.refusal, "quota_exceeded");
  t.equal(d.rate?.remaining, 3);
});

t.test("decide: dry run never refuses but names the would-be refusal", async (t) => {
  const d = decide(
    input({ dryRun: true, rate: { rule: rate, count: { consumed: 9, msBeforeNext: 5000 } } }),
  );
  t.equal(d.allowed, true);
  t.equal(d.refusal, "rate_limited");
  t.equal(d.rate?.remaining, 0, "never negative");
});

t.test("renderDecision writes headers once and the 429", async (t) => {
  const allowed = decide(
    input({
      rate: { rule: rate, count: { consumed: 1, msBeforeNext: 60_000 } },
      quota: { rule: quota, count: { consumed: 1, msBeforeNext: 0 }, endMs: NOW + 30_000 },
    }),
  );
  const headers: Record<string, string> = {};
  t.equal(renderDecision(allowed, headers, "seconds"), undefined);
  t.strictSame(headers, {
    "x-ratelimit-limit": "5",
    "x-ratelimit-remaining": "4",
    "x-ratelimit-reset": "60",
    "x-request-quota-limit": "10",
    "x-request-quota-limit-remaining": "9",
  });
  const unix: Record<string, string> = {};
  renderDecision(allowed, unix, "unix");
  t.equal(unix["x-ratelimit-reset"], String(Math.ceil((NOW + 60_000) / 1000)));

  const refused = decide(
    input({ rate: { rule: rate, count: { consumed: 6, msBeforeNext: 7000 } } }),
  );
  const onlyRate: Record<string, string> = {};
  const reply = renderDecision(refused, onlyRate, "seconds");
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
    },
  });
});

t.test("memory store: the limit is not part of a counter's identity", async (t) => {
  const store = createMemoryStore();
  const first = store.limiter({ name: "rate:plan:p", points: 5, durationMs: 60_000 });
  await first.penalty("client:a", 3);
  const changed = store.limiter({ name: "rate:plan:p", points: 8, durationMs: 60_000 });
  t.equal(changed, first, "same counters");
  t.equal(changed.points, 8, "RLF's own verdict follows the new limit");
  t.equal((await changed.get("client:a"))?.consumedPoints, 3);
  const otherWindow = store.limiter({ name: "rate:plan:p", points: 8, durationMs: 1000 });
  t.not(otherWindow, first, "another window is another rule");
  t.equal(ruleFingerprint({ name: "x", points: 1, durationMs: 5 }), "x|5");
});

t.test(
  "memory store: saved counters come back, before or after their limiter exists",
  async (t) => {
    const rule = { name: "rate:plan:p", points: 5, durationMs: 60_000 };
    const late = { name: "quota:plan:p:day", points: 5, durationMs: 86_400_000 };
    const before = createMemoryStore();
    await before.limiter(rule).penalty("ip:1.2.3.4", 2);
    await before.limiter(late).penalty("ip:1.2.3.4@0", 4);
    const saved = before.save();

    const after = createMemoryStore();
    const existing = after.limiter(rule);
    after.restore(JSON.parse(JSON.stringify(saved)));
    t.equal((await existing.get("ip:1.2.3.4"))?.consumedPoints, 2);
    t.strictSame(Object.keys(after.save()).sort(), Object.keys(saved).sort(), "kept until used");
    t.equal((await after.limiter(late).get("ip:1.2.3.4@0"))?.consumedPoints, 4);
  },
);

// addPoints counts through RLF's memory storage directly (store.ts); RLF's own API must agree.
t.test("memory store: synchronous counts agree with rate-limiter-flexible's own", async (t) => {
  const store = createMemoryStore();
  const limiter = store.limiter({ name: "rate:plan:sync", points: 10, durationMs: 60_000 });
  const first = addPoints(limiter, "client:a", 2);
  t.notOk(first instanceof Promise, "counted at once");
  t.match(first, { consumed: 2 });
  await limiter.penalty("client:a", 3);
  const second = addPoints(limiter, "client:a", 1) as Count;
  t.equal(second.consumed, 6, "one counter behind both APIs");
  t.ok(
    second.msBeforeNext > 59_000 && second.msBeforeNext <= 60_000,
    "the window's remaining time",
  );
  t.equal((await limiter.get("client:a"))?.consumedPoints, 6);
  t.equal(refundPoints(limiter, "client:a", 4), undefined, "refunded at once");
  t.equal((await limiter.get("client:a"))?.consumedPoints, 2);

  const quota = addPoints(limiter, "client:b@0", 1, 5) as Count;
  t.ok(quota.msBeforeNext > 4_000 && quota.msBeforeNext <= 5_000, "a lifetime of its own");
  const seen = (await limiter.get("client:b@0"))?.msBeforeNext ?? 0;
  t.ok(quota.msBeforeNext - seen < 1_000, "RLF sees the same lifetime");
});
