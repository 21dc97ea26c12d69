/**
 * Long windows through real sockets, with an injected clock: a monthly quota, a 30-day and a
 * 366-day rate limit and a 30-day failure window each hold for their whole length (Node clamps
 * timer delays over 2^31-1 ms, about 24.8 days, to 1 ms, so no counter may rely on a timer), and
 * a restart with `state_file` in the middle of a long window goes on where it was.
 */
import { readFile } from "node:fs/promises";
import t from "tap";
import { json } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, form, postToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { manualClock } from "./helpers/clock.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const DAY = 86_400_000;

function anonymous(limits: string, extra = ""): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
${limits}
routes:
  - path: /open
    methods: [GET]
    auth: none
${extra}`,
  );
}

async function status(url: string): Promise<{ status: number; headers: Headers }> {
  const response = await fetch(`${url}/open`);
  await response.arrayBuffer();
  return { status: response.status, headers: response.headers };
}

for (const [window, days] of [
  ["30d", 30],
  ["366d", 366],
] as const) {
  t.test(`a ${window} rate limit refuses until its last millisecond`, async (t) => {
    const start = Date.UTC(2027, 0, 1, 12);
    let now = start;
    const clock = manualClock();
    const g = await startTestGatehouse(
      anonymous(`    rate_limit: { limit: 1, window: ${window} }`),
      { now: () => now, clock },
    );
    t.teardown(() => g.close());
    t.equal((await status(g.url)).status, 200);
    // The gatehouse's own background work (the store's sweep) runs meanwhile; no timer may end
    // the window.
    clock.advance(10_000);
    for (const at of [1, DAY, 25 * DAY, (days - 1) * DAY, days * DAY - 1]) {
      now = start + at;
      const refused = await status(g.url);
      t.equal(refused.status, 429, `refused ${at} ms in`);
      t.equal(
        refused.headers.get("retry-after"),
        String(Math.ceil((days * DAY - at) / 1000)),
        "Retry-After counts down to the window's end",
      );
    }
    now = start + days * DAY;
    t.equal((await status(g.url)).status, 200, "a new window");
  });
}

t.test("a monthly quota holds on every day of months of 28 to 31 days", async (t) => {
  let now = Date.UTC(2028, 0, 1);
  const g = await startTestGatehouse(anonymous("    quota: { limit: 1, period: month }"), {
    now: () => now,
  });
  t.teardown(() => g.close());
  // January (31), February of a leap year (29), April (30), February 2029 (28).
  for (const [year, month, days] of [
    [2028, 0, 31],
    [2028, 1, 29],
    [2028, 3, 30],
    [2029, 1, 28],
  ] as const) {
    now = Date.UTC(year, month, 1);
    const first = await status(g.url);
    t.equal(first.status, 200, `${year}-${month + 1}-01 00:00 is served`);
    t.equal(first.headers.get("x-request-quota-limit-remaining"), "0");
    const refusals: number[] = [];
    for (let day = 1; day <= days; day++) {
      now = Date.UTC(year, month, day, 23, 59, 59);
      refusals.push((await status(g.url)).status);
    }
    t.strictSame(
      refusals,
      new Array<number>(days).fill(429),
      `refused on every one of its ${days} days`,
    );
    now = Date.UTC(year, month, days, 23, 59, 59, 999);
    const last = await status(g.url);
    t.equal(last.headers.get("retry-after"), "1", "renews at the month's end");
  }
});

t.test("a restart with state_file in the middle of a long window goes on", async (t) => {
  const start = Date.UTC(2027, 4, 3);
  let now = start;
  const yaml = anonymous(
    "    rate_limit: { limit: 2, window: 30d }\n    quota: { limit: 5, period: month }",
    "limits:\n  state_file: counters.json\n",
  );
  const first = await startTestGatehouse(yaml, { now: () => now });
  t.equal((await status(first.url)).status, 200);
  t.equal((await status(first.url)).status, 200);
  await first.gatehouse.shutdown();
  const saved = await readFile(`${first.dir}/counters.json`, "utf8");
  await first.close();

  now = start + 20 * DAY;
  const second = await startTestGatehouse(yaml, {
    now: () => now,
    files: { "counters.json": saved },
  });
  t.teardown(() => second.close());
  const refused = await status(second.url);
  t.equal(refused.status, 429, "20 days later the 30-day window still holds");
  t.equal(refused.headers.get("x-request-quota-limit-remaining"), "3");
  t.equal(refused.headers.get("retry-after"), String(10 * 86_400));
  now = start + 30 * DAY;
  t.equal((await status(second.url)).status, 200, "after 30 days, a new window");
});

t.test("a 30-day failure window refuses until it ends", async (t) => {
  const app: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };
  const start = Date.UTC(2027, 6, 1);
  let now = start;
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  failure_limit: { limit: 1, window: 30d }
${await clientsYaml([app])}
routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    { now: () => now },
  );
  t.teardown(() => g.close());
  const attempt = (secret: string) =>
    postToken(g.url, {
      body: form([
        ["client_id", app.id],
        ["client_secret", secret],
      ]),
    });
  t.equal((await attempt("wrong-secret")).status, 401, "the first failure");
  for (const at of [DAY, 25 * DAY, 30 * DAY - 1000]) {
    now = start + at;
    const refused = await attempt(app.secret);
    t.equal(refused.status, 429, `even the right secret is refused ${at / DAY} days in`);
    t.match(json(refused), { error: "rate_limited" });
  }
  now = start + 30 * DAY;
  t.equal((await attempt(app.secret)).status, 200, "the window has ended");
});
