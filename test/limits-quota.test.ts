import t from "tap";
import { startTestGatehouse, configFor } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

function plan(rate: string, quota: string): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
    rate_limit: ${rate}
    quota: ${quota}
routes:
  - path: /open
    methods: [GET]
    auth: none
`,
  );
}

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown> | undefined;
}

async function get(url: string): Promise<Answer> {
  const response = await fetch(`${url}/open`);
  const body =
    response.status === 429 ? ((await response.json()) as Record<string, unknown>) : undefined;
  if (body === undefined) await response.arrayBuffer();
  return { status: response.status, headers: response.headers, body };
}

function quotaLeft(answer: Answer): string | null {
  return answer.headers.get("x-request-quota-limit-remaining");
}

t.test("an exhausted daily quota answers quota_exceeded until the UTC midnight", async (t) => {
  let now = Date.UTC(2026, 2, 31, 23, 59, 30);
  const g = await startTestGatehouse(
    plan("{ limit: 100, window: 1m }", "{ limit: 3, period: day }"),
    { now: () => now },
  );
  t.teardown(() => g.close());
  for (const left of ["2", "1", "0"]) {
    const answer = await get(g.url);
    t.equal(answer.status, 200);
    t.equal(answer.headers.get("x-request-quota-limit"), "3");
    t.equal(quotaLeft(answer), left);
  }
  const refused = await get(g.url);
  t.equal(refused.status, 429);
  t.equal(refused.headers.get("retry-after"), "30", "the seconds to 2026-04-01T00:00:00Z");
  t.equal(refused.headers.get("x-request-quota-limit"), "3", "the 429 carries the quota headers");
  t.equal(quotaLeft(refused), "0");
  t.equal(refused.headers.get("x-ratelimit-limit"), "100", "the rate headers too");
  t.equal(refused.headers.get("x-ratelimit-remaining"), "97");
  t.match(refused.headers.get("x-ratelimit-reset") ?? "", /^\d+$/, "X-RateLimit-Reset present");
  t.match(refused.body, { error: "quota_exceeded", retry_after: 30, limit: 3, window: "day" });

  now = Date.UTC(2026, 3, 1, 0, 0, 0);
  const nextDay = await get(g.url);
  t.equal(nextDay.status, 200, "a new day, a new quota");
  t.equal(quotaLeft(nextDay), "2");
});

t.test("a monthly quota renews on the first of the next month", async (t) => {
  const now = Date.UTC(2026, 1, 28, 23, 0, 0);
  const g = await startTestGatehouse(
    plan("{ limit: 100, window: 1m }", "{ limit: 1, period: month }"),
    { now: () => now },
  );
  t.teardown(() => g.close());
  t.equal((await get(g.url)).status, 200);
  const refused = await get(g.url);
  t.equal(refused.status, 429);
  t.equal(refused.headers.get("retry-after"), "3600");
  t.match(refused.body, { error: "quota_exceeded", window: "month", limit: 1 });
});

t.test("requests refused by the rate limit consume no quota", async (t) => {
  const g = await startTestGatehouse(
    plan("{ limit: 2, window: 1m }", "{ limit: 10, period: day }"),
  );
  t.teardown(() => g.close());
  t.equal(quotaLeft(await get(g.url)), "9");
  t.equal(quotaLeft(await get(g.url)), "8");
  for (let i = 0; i < 3; i++) {
    const refused = await get(g.url);
    t.equal(refused.status, 429);
    t.equal(refused.body?.error, "rate_limited");
    t.equal(quotaLeft(refused), "8", "the quota is untouched by the 429");
  }
});

t.test("requests refused by the quota consume no rate limit", async (t) => {
  const g = await startTestGatehouse(
    plan("{ limit: 5, window: 1m }", "{ limit: 1, period: hour }"),
  );
  t.teardown(() => g.close());
  t.equal((await get(g.url)).headers.get("x-ratelimit-remaining"), "4");
  for (let i = 0; i < 3; i++) {
    const refused = await get(g.url);
    t.equal(refused.body?.error, "quota_exceeded");
    t.equal(refused.headers.get("x-ratelimit-remaining"), "4");
  }
});

t.test("when both refuse, the later reset names the error", async (t) => {
  const now = Date.UTC(2026, 5, 10, 12, 0, 0);
  const g = await startTestGatehouse(
    plan("{ limit: 1, window: 1m }", "{ limit: 1, period: day }"),
    { now: () => now },
  );
  t.teardown(() => g.close());
  t.equal((await get(g.url)).status, 200);
  const refused = await get(g.url);
  t.match(refused.body, { error: "quota_exceeded", window: "day", retry_after: 43200 });
  t.equal(refused.headers.get("retry-after"), "43200", "the largest reset of the two");
});
