// The Redis store reaching a Redis that wants an ACL user and its password: the right password
// counts, a wrong one is an outage that each on_outage answers, and no secret reaches the logs
// or /metrics.
import { randomBytes } from "node:crypto";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected, get, readiness } from "./helpers/redis-gatehouse.js";
import { metric, scrape } from "./helpers/metrics.js";
import { redisCli, startAclRedis } from "./helpers/redis-topologies.js";
import { scriptPipes } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const PASSWORD = `acl-password-${randomBytes(8).toString("hex")}`;
const acl = await startAclRedis("gatehouse", PASSWORD);
t.teardown(() => acl.close());

function config(redis: string, onOutage = "closed", limit = 2): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
    rate_limit: { limit: ${limit}, window: 1h }
limits:
  store: redis
  redis:
${redis}
    key_prefix: "gatehouse-test-${randomBytes(6).toString("hex")}:"
    timeout: 1s
    on_outage: ${onOutage}
routes:
  - path: /open
    methods: [GET]
    auth: none
`,
  );
}

const aclConfig = (onOutage?: string, limit?: number) =>
  config(
    `    url: ${acl.url}\n    username: gatehouse\n    password_env: REDIS_PASSWORD`,
    onOutage,
    limit,
  );

async function started(
  t: Test,
  yaml: string,
  options: Parameters<typeof startTestGatehouse>[1],
): Promise<TestGatehouse> {
  const g = await startTestGatehouse(yaml, options);
  t.teardown(() => g.close());
  return g;
}

t.test("an ACL user with its password counts; the password is nowhere to be seen", async (t) => {
  const g = await started(t, aclConfig("closed", 1000), { env: { REDIS_PASSWORD: PASSWORD } });
  t.ok(await connected(g), "authenticated");
  const response = await get(g);
  t.equal(response.status, 200);
  t.equal(response.headers.get("x-ratelimit-remaining"), "999", "counted in Redis");
  const pipes = async () =>
    scriptPipes(
      await redisCli(acl.port, ["--user", "gatehouse", "--pass", PASSWORD, "CLIENT", "LIST"]),
    );
  t.ok(
    await eventually(async () => {
      t.equal((await get(g)).status, 200);
      return (await pipes()).length === 1;
    }, 30_000),
    "the script goes through a pipe",
  );
  t.match(await pipes(), [/ user=gatehouse /], "authenticated as the ACL user");
  t.notOk(JSON.stringify(g.logs).includes(PASSWORD), "not in the logs");
  t.notOk((await scrape(g)).includes(PASSWORD), "not in /metrics");
});

// Each policy after a failed authentication, as after any outage.
const wrong = { env: { REDIS_PASSWORD: "not-the-password" } };

async function refusedByRedis(t: Test, g: TestGatehouse): Promise<void> {
  t.ok(
    await eventually(async () =>
      g.logs.some((line) => /redis does not answer/.test(String(line.msg))),
    ),
    "the failed authentication is logged as an outage",
  );
  t.equal(await metric(g, "gatehouse_limiter_store_up"), 0);
  t.notOk(JSON.stringify(g.logs).includes("not-the-password"), "the password is not logged");
}

t.test("a wrong password under on_outage local: served with local limits", async (t) => {
  const g = await started(t, aclConfig("local"), wrong);
  await refusedByRedis(t, g);
  const answers = [await get(g), await get(g), await get(g)];
  t.same(
    answers.map((response) => response.status),
    [200, 200, 429],
  );
  t.equal(answers[0]?.headers.get("x-ratelimit-limit"), "2", "with the plan's headers");
  t.equal(await readiness(g), 200);
});

t.test("a wrong password under on_outage open: served without limit headers", async (t) => {
  const g = await started(t, aclConfig("open"), wrong);
  await refusedByRedis(t, g);
  for (let i = 0; i < 3; i++) {
    const response = await get(g);
    t.equal(response.status, 200, "over the limit of 2, yet served");
    t.equal(response.headers.get("x-ratelimit-limit"), null, "uncounted: no headers");
  }
  t.equal(await readiness(g), 200);
});

t.test("a wrong password under on_outage closed: 503 and not ready", async (t) => {
  const g = await started(t, aclConfig("closed"), wrong);
  await refusedByRedis(t, g);
  const before = upstream.received.length;
  const response = await fetch(`${g.url}/open`);
  t.equal(response.status, 503);
  t.match(await response.json(), { error: "limits_unavailable" });
  t.equal(upstream.received.length, before, "nothing forwarded");
  t.equal(await readiness(g), 503);
});
