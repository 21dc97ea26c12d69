import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import got from "got";
import t from "tap";
import { startTestGatehouse, configFor } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";
import { refusingPort } from "./helpers/ports.js";
import { scrape } from "./helpers/metrics.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const OPEN_ROUTE = `routes:
  - path: /open
    methods: [GET]
    auth: none
`;

function anonymous(limit: number, window = "1m", extra = ""): string {
  return configFor(
    upstream.url,
    `plans:\n  anonymous:\n    rate_limit: { limit: ${limit}, window: ${window} }\n${OPEN_ROUTE}${extra}`,
  );
}

async function get(url: string): Promise<Response> {
  const response = await fetch(`${url}/open`);
  await response.arrayBuffer();
  return response;
}

t.test(
  "dry_run counts and sends headers, logs and counts would-be refusals, never 429",
  async (t) => {
    const g = await startTestGatehouse(anonymous(1, "1m", "limits:\n  dry_run: true\n"));
    t.teardown(() => g.close());
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await get(g.url);
      statuses.push(response.status);
      t.equal(response.headers.get("x-ratelimit-remaining"), "0");
    }
    t.strictSame(statuses, [200, 200, 200]);
    const dryRuns = g.logs.filter((line) => String(line.msg).startsWith("dry run"));
    t.equal(dryRuns.length, 2, "each would-be 429 is logged");
    t.match(dryRuns[0], { refusal: "rate_limited", plan: "anonymous" });
    const decisions = g.logs.filter((l) => l.msg === "request").map((l) => l.decision);
    t.strictSame(decisions, ["allowed", "dry_run_rate_limited", "dry_run_rate_limited"]);
    const metrics = await scrape(g);
    t.match(
      metrics,
      /gatehouse_limit_refusals_total\{refusal="rate_limited",dry_run="true",plan="anonymous",limit="default"\} 2/,
    );

    // All 3 were counted only if a limit of 3, the same window, refuses the next request.
    await g.writeConfig(anonymous(3, "1m", "limits:\n  dry_run: false\n"));
    t.equal(await g.gatehouse.reload(), "success");
    const next = await fetch(`${g.url}/open`);
    t.equal(next.status, 429, "the would-be refusals were counted");
    t.equal(((await next.json()) as { error: string }).error, "rate_limited");
    t.equal(next.headers.get("x-ratelimit-limit"), "3", "the reloaded limit");
  },
);

t.test("a 502 carries the limit headers of the request", async (t) => {
  const g = await startTestGatehouse(
    configFor(
      `http://127.0.0.1:${await refusingPort()}`,
      `plans:\n  anonymous:\n    rate_limit: { limit: 5, window: 1m }\n    quota: { limit: 50, period: day }\n${OPEN_ROUTE}`,
    ),
  );
  t.teardown(() => g.close());
  const response = await fetch(`${g.url}/open`);
  t.equal(response.status, 502);
  t.equal(((await response.json()) as { error: string }).error, "bad_gateway");
  t.equal(response.headers.get("x-ratelimit-limit"), "5");
  t.equal(response.headers.get("x-ratelimit-remaining"), "4");
  t.ok(response.headers.get("x-ratelimit-reset"));
  t.equal(response.headers.get("x-request-quota-limit"), "50");
  t.equal(response.headers.get("x-request-quota-limit-remaining"), "49");
});

t.test("a 504 carries the limit headers of the request", async (t) => {
  const silent = await startUpstream(() => undefined);
  t.teardown(() => silent.close());
  const g = await startTestGatehouse(
    `upstream:\n  url: ${silent.url}\n  timeout: 200ms\nshutdown:\n  grace: 1s\n` +
      `plans:\n  anonymous:\n    rate_limit: { limit: 5, window: 1m }\n${OPEN_ROUTE}`,
  );
  t.teardown(() => g.close());
  const response = await fetch(`${g.url}/open`);
  t.equal(response.status, 504);
  await response.arrayBuffer();
  t.equal(response.headers.get("x-ratelimit-limit"), "5");
  t.equal(response.headers.get("x-ratelimit-remaining"), "4");
});

t.test("a reload keeps counters; a changed limit applies from the next request", async (t) => {
  const plans = (anonymousLimit: number, otherLimit: number) =>
    configFor(
      upstream.url,
      `plans:
  anonymous:
    rate_limit: { limit: ${anonymousLimit}, window: 1m }
  other:
    rate_limit: { limit: ${otherLimit}, window: 1m }
${OPEN_ROUTE}`,
    );
  const g = await startTestGatehouse(plans(3, 10));
  t.teardown(() => g.close());
  t.equal((await get(g.url)).headers.get("x-ratelimit-remaining"), "2");
  t.equal((await get(g.url)).headers.get("x-ratelimit-remaining"), "1");

  await g.writeConfig(plans(3, 20));
  t.equal(await g.gatehouse.reload(), "success");
  t.equal(
    (await get(g.url)).headers.get("x-ratelimit-remaining"),
    "0",
    "another plan changed: this one kept its count",
  );
  t.equal((await get(g.url)).status, 429);

  await g.writeConfig(plans(5, 20));
  t.equal(await g.gatehouse.reload(), "success");
  const raised = await get(g.url);
  t.equal(raised.status, 200, "the new limit applies at once");
  t.equal(raised.headers.get("x-ratelimit-limit"), "5");
  t.equal(raised.headers.get("x-ratelimit-remaining"), "1", "3 counted before, 1 now");
  t.equal((await get(g.url)).headers.get("x-ratelimit-remaining"), "0");
  t.equal((await get(g.url)).status, 429);
});

t.test("state_file carries counters across a restart", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-state-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const stateFile = join(dir, "counters.json");
  const yaml = configFor(
    upstream.url,
    `plans:
  anonymous:
    rate_limit: { limit: 5, window: 1h }
    quota: { limit: 10, period: day }
${OPEN_ROUTE}limits:
  state_file: ${stateFile}
`,
  );
  const first = await startTestGatehouse(yaml);
  await get(first.url);
  await get(first.url);
  await first.close();
  const saved = JSON.parse(await readFile(stateFile, "utf8")) as { version: number };
  t.equal(saved.version, 2);

  const second = await startTestGatehouse(yaml);
  t.teardown(() => second.close());
  const response = await get(second.url);
  t.equal(response.headers.get("x-ratelimit-remaining"), "2", "2 before the restart, 1 after");
  t.equal(response.headers.get("x-request-quota-limit-remaining"), "7");
});

t.test("state_file is relative to the config file's folder", async (t) => {
  const yaml = anonymous(5, "1h", "limits:\n  state_file: counters.json\n");
  const g = await startTestGatehouse(yaml);
  t.teardown(() => g.close());
  await get(g.url);
  await g.gatehouse.shutdown();
  const saved = JSON.parse(await readFile(join(g.dir, "counters.json"), "utf8")) as {
    counters: Array<{ key: string; value: number }>;
  };
  t.strictSame(
    saved.counters.map((c) => [c.key, c.value]),
    [["rate:plan:anonymous:default:3600000|ip:127.0.0.1", 1]],
  );
});

t.test("an unreadable state_file is logged and counters start empty", async (t) => {
  const yaml = anonymous(5, "1h", "limits:\n  state_file: counters.json\n");
  const g = await startTestGatehouse(yaml, { files: { "counters.json": "{not json" } });
  t.teardown(() => g.close());
  t.ok(g.logs.some((line) => line.msg === "state file unreadable; counters start empty"));
  t.equal((await get(g.url)).headers.get("x-ratelimit-remaining"), "4");
});

t.test("a client honouring Retry-After waits and then succeeds", async (t) => {
  const g = await startTestGatehouse(anonymous(1, "1s"));
  t.teardown(() => g.close());
  t.equal((await get(g.url)).status, 200);
  const waits: number[] = [];
  const response = await got(`${g.url}/open`, {
    retry: {
      limit: 3,
      statusCodes: [429],
      calculateDelay: ({ retryAfter, computedValue }) => {
        if (retryAfter !== undefined) waits.push(retryAfter);
        return computedValue;
      },
    },
  });
  t.equal(response.statusCode, 200);
  t.equal(response.retryCount, 1, "one 429, then success");
  t.strictSame(waits, [1000], "the wait came from Retry-After: 1");
});
