/**
 * Several named rate limits per plan, through real sockets with an injected clock: which limit
 * the headers, Retry-After and the 429 body describe, a refusal by one limit taking nothing from
 * the others, a client's own set replacing the plan's, the IETF RateLimit and RateLimit-Policy
 * fields read back with a strict Structured Fields parser (RFC 9651), and the near-limit metric.
 */
import { parseList, type Item, type InnerList } from "structured-headers";
import t, { type Test } from "tap";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { scrape } from "./helpers/metrics.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const START = Date.UTC(2027, 2, 10, 12);

function config(plan: string, extra = ""): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
${plan}
routes:
  - path: /open
    methods: [GET]
    auth: none
${extra}`,
  );
}

const BURST_AND_SUSTAINED = `    rate_limits:
      burst: { limit: 2, window: 1s }
      sustained: { limit: 5, window: 1h }
    quota: { limit: 100, period: month }`;

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Record<string, unknown>;
}

async function get(g: TestGatehouse): Promise<Answer> {
  const response = await fetch(`${g.url}/open`);
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: response.status === 429 ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

async function started(t: Test, yaml: string, clock: { now: number }) {
  const g = await startTestGatehouse(yaml, { now: () => clock.now });
  t.teardown(() => g.close());
  return g;
}

t.test(
  "a burst limit refuses while the sustained one has room, and the other way round",
  async (t) => {
    const clock = { now: START };
    const g = await started(t, config(BURST_AND_SUSTAINED), clock);
    const first = await get(g);
    t.equal(first.status, 200);
    t.equal(first.headers.get("x-ratelimit-limit"), "2", "the burst has the fewest points left");
    t.equal(first.headers.get("x-ratelimit-remaining"), "1");
    t.equal((await get(g)).status, 200);
    const burst = await get(g);
    t.equal(burst.status, 429, "the burst is used up");
    t.match(burst.body, { error: "rate_limited", policy: "burst", limit: 2, window: "1s" });
    t.equal(burst.headers.get("retry-after"), "1");
    t.equal(burst.headers.get("x-ratelimit-limit"), "2", "the headers describe the refusing limit");
    t.equal(burst.headers.get("x-ratelimit-reset"), "1");
    t.equal(burst.headers.get("x-request-quota-limit-remaining"), "98", "nothing taken by the 429");

    clock.now += 1000;
    const next = await get(g);
    t.equal(next.status, 200, "a new burst window");
    t.equal(next.headers.get("x-ratelimit-limit"), "2", "burst: 1 left, sustained: 2");
    t.equal(next.headers.get("x-ratelimit-remaining"), "1");
    t.equal(next.headers.get("x-ratelimit-limit"), "2");
    clock.now += 1000;
    const last = await get(g);
    t.equal(last.status, 200);
    t.equal(last.headers.get("x-ratelimit-limit"), "5", "now the sustained one has fewest left");
    t.equal(last.headers.get("x-ratelimit-remaining"), "1");
    clock.now += 1000;
    t.equal((await get(g)).status, 200, "the fifth in the hour");
    clock.now += 1000;
    const sustained = await get(g);
    t.equal(sustained.status, 429, "the sustained limit refuses though the burst has room");
    t.match(sustained.body, { error: "rate_limited", policy: "sustained", limit: 5, window: "1h" });
    t.equal(sustained.headers.get("x-ratelimit-limit"), "5");
    t.equal(sustained.headers.get("retry-after"), String(3600 - 4));
    t.equal(sustained.headers.get("x-request-quota-limit-remaining"), "95");
  },
);

t.test("the quota refusing: policy quota, Retry-After from the quota", async (t) => {
  const clock = { now: START };
  const g = await started(
    t,
    config(`    rate_limits:
      burst: { limit: 10, window: 1s }
      sustained: { limit: 50, window: 1h }
    quota: { limit: 1, period: day }`),
    clock,
  );
  t.equal((await get(g)).status, 200);
  const refused = await get(g);
  t.equal(refused.status, 429);
  t.match(refused.body, { error: "quota_exceeded", policy: "quota", limit: 1, window: "day" });
  t.equal(refused.headers.get("retry-after"), String(12 * 3600));
  t.equal(refused.headers.get("x-ratelimit-limit"), "10", "rate headers: the fewest points left");
  t.equal(refused.headers.get("x-ratelimit-remaining"), "9", "the 429 took nothing");
});

t.test("a client's own rate_limits replace the plan's whole set", async (t) => {
  const solo = { id: "solo", secret: "a-long-secret-for-the-solo-client" };
  const other = { id: "other", secret: "a-long-secret-for-the-other-client" };
  const clients = (await clientsYaml([solo, other])).replace(
    "  - id: other\n",
    "  - id: other\n    plan: standard\n",
  );
  const clock = { now: START };
  const g = await started(
    t,
    configFor(
      upstream.url,
      `${clients.replace(
        "  - id: solo\n",
        "  - id: solo\n    plan: standard\n    rate_limits:\n      only: { limit: 3, window: 1m }\n",
      )}plans:
  standard:
    rate_limits:
      burst: { limit: 1, window: 1s }
      sustained: { limit: 100, window: 1h }
    quota: { limit: 50, period: day }
routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    clock,
  );
  const call = async (client: TestClient): Promise<Answer> => {
    const token = await obtainToken(g.url, client);
    const response = await fetch(`${g.url}/v1/items`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const text = await response.text();
    return {
      status: response.status,
      headers: response.headers,
      body: response.status === 429 ? (JSON.parse(text) as Record<string, unknown>) : {},
    };
  };
  const statuses = [
    (await call(solo)).status,
    (await call(solo)).status,
    (await call(solo)).status,
  ];
  t.strictSame(statuses, [200, 200, 200], "no burst limit of 1 per second: the plan's set is gone");
  const refused = await call(solo);
  t.match(refused.body, { policy: "only", limit: 3, window: "1m" });
  t.equal(refused.headers.get("x-request-quota-limit"), "50", "the plan's quota stays");
  t.equal((await call(other)).status, 200);
  t.match((await call(other)).body, { policy: "burst" }, "the plan's own clients keep its set");
});

function items(field: string | null): Array<[string, Map<string, unknown>]> {
  // A strict RFC 9651 parser: a malformed field throws.
  return parseList(field ?? "").map((member: Item | InnerList) => {
    const [value, params] = member;
    return [String(value), params as Map<string, unknown>];
  });
}

t.test("IETF RateLimit and RateLimit-Policy, item by item", async (t) => {
  const clock = { now: START };
  const g = await started(
    t,
    config(BURST_AND_SUSTAINED, "limits:\n  headers: [ietf, x-ratelimit]\n"),
    clock,
  );
  const first = await get(g);
  const policy = items(first.headers.get("ratelimit-policy"));
  t.strictSame(
    policy.map(([name, params]) => [name, params.get("q"), params.get("w")]),
    [
      ["burst", 2, 1],
      ["sustained", 5, 3600],
      ["quota", 100, 31 * 86_400],
    ],
    "every policy of the plan, rate limits first; the quota's w is this month's length",
  );
  t.ok(
    policy.every(([, params]) => !params.has("pk")),
    "no pk parameter",
  );
  const limits = items(first.headers.get("ratelimit"));
  t.strictSame(
    limits.map(([name, params]) => [name, params.get("r"), params.get("t")]),
    [
      ["burst", 1, 1],
      ["sustained", 4, 3600],
      ["quota", 99, Math.ceil((Date.UTC(2027, 3, 1) - START) / 1000)],
    ],
  );
  t.equal(first.headers.get("x-ratelimit-limit"), "2", "both families are sent");
  await get(g);
  const refused = await get(g);
  t.equal(refused.status, 429);
  t.strictSame(
    items(refused.headers.get("ratelimit")).map(([name, params]) => [name, params.get("r")]),
    [
      ["burst", 0],
      ["sustained", 3],
      ["quota", 98],
    ],
    "r never negative; the refused request took nothing",
  );
  t.equal(refused.headers.get("retry-after"), "1", "Retry-After as ever");
});

t.test("headers: [ietf] alone sends no X-RateLimit or X-Request-Quota fields", async (t) => {
  const clock = { now: START };
  const g = await started(
    t,
    config("    quota: { limit: 3, period: hour }", "limits:\n  headers: [ietf]\n"),
    clock,
  );
  const answer = await get(g);
  t.equal(answer.headers.get("x-ratelimit-limit"), null);
  t.equal(answer.headers.get("x-request-quota-limit"), null);
  t.strictSame(
    items(answer.headers.get("ratelimit")).map(([name, params]) => [name, params.get("r")]),
    [["quota", 2]],
    "a quota-only plan: the quota's item only",
  );
  t.equal(answer.headers.get("ratelimit-policy"), '"quota";q=3;w=3600');
});

t.test("near-limit and refusal counts by plan and limit", async (t) => {
  const clock = { now: START };
  const g = await started(t, config(BURST_AND_SUSTAINED), clock);
  for (let i = 0; i < 3; i++) await get(g);
  const text = await scrape(g);
  t.match(
    text,
    /gatehouse_limit_near_total\{plan="anonymous",limit="burst"\} 1\n/,
    "the second request left 0 of 2",
  );
  t.notMatch(text, /gatehouse_limit_near_total\{plan="anonymous",limit="sustained"\}/);
  t.match(
    text,
    /gatehouse_limit_refusals_total\{refusal="rate_limited",dry_run="false",plan="anonymous",limit="burst"\} 1\n/,
  );
});
