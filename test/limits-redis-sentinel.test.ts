// The Redis store behind Sentinel (a primary, a replica, three Sentinels that the test starts):
// counting through the primary the Sentinels name, and a failover that gatehouse follows by
// itself when the primary is SIGKILLed.
import { randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import t from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { connected, get } from "./helpers/redis-gatehouse.js";
import { redisCli, startTestSentinels } from "./helpers/redis-topologies.js";
import { scriptPipes } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const sentinels = await startTestSentinels();
t.teardown(() => sentinels.close());

// How soon after the promotion counting must resume.
const RESUME_MS = 5000;

const yaml = configFor(
  upstream.url,
  `plans:
  anonymous:
    rate_limit: { limit: 1000, window: 1h }
limits:
  store: redis
  redis:
    sentinel:
      master_name: ${sentinels.masterName}
      nodes: [${sentinels.nodes.join(", ")}]
      password_env: SENTINEL_PASSWORD
    key_prefix: "gatehouse-test-${randomBytes(6).toString("hex")}:"
    timeout: 1s
    on_outage: closed
routes:
  - path: /open
    methods: [GET]
    auth: none
`,
);

t.test("a failover: gatehouse follows the new primary and counts again", async (t) => {
  const g = await startTestGatehouse(yaml, { env: { SENTINEL_PASSWORD: sentinels.password } });
  t.teardown(() => g.close());
  t.ok(await connected(g), "connected to the primary the Sentinels name");
  const first = await get(g);
  t.equal(first.status, 200);
  t.equal(first.headers.get("x-ratelimit-remaining"), "999", "counted in Redis");
  const throughPipe = async (port: number) =>
    eventually(async () => {
      await get(g);
      return scriptPipes(await redisCli(port, ["CLIENT", "LIST"])).length === 1;
    }, 30_000);
  t.ok(await throughPipe(await sentinels.primaryPort()), "the script goes through a pipe");
  t.notOk(
    JSON.stringify(g.logs).includes(sentinels.password),
    "the Sentinels' password is in no log line",
  );

  // The promotion, as the Sentinels announce it.
  const watcher = new Redis({ port: sentinels.sentinelPorts[0], password: sentinels.password });
  t.teardown(() => watcher.disconnect());
  await watcher.subscribe("+switch-master");
  const promoted = new Promise<{ at: number; message: string }>((done) =>
    watcher.once("message", (_channel, message: string) =>
      done({ at: performance.now(), message }),
    ),
  );
  const old = await sentinels.primaryPort();
  await sentinels.kill(old);

  // Requests keep coming; under on_outage closed a 200 with limit headers was counted in Redis.
  let resumedAt: number | undefined;
  let promotion: { at: number; message: string } | undefined;
  void promoted.then((event) => (promotion = event));
  const end = performance.now() + 60_000;
  while (resumedAt === undefined && performance.now() < end) {
    const response = await get(g);
    const counted = response.status === 200 && response.headers.has("x-ratelimit-remaining");
    if (counted && promotion !== undefined) resumedAt = performance.now();
    else await new Promise((done) => setTimeout(done, 20));
  }
  t.ok(promotion, "the Sentinels promoted the replica");
  t.ok(resumedAt, "counting resumed");
  const { at, message } = promotion as { at: number; message: string };
  const newPort = await sentinels.primaryPort();
  t.not(newPort, old, "a new primary");
  t.match(message, `${sentinels.masterName} 127.0.0.1 ${old} 127.0.0.1 ${newPort}`);
  // A requirement measured on purpose: counting resumes within 5 s of the promotion.
  const waited = Math.max(0, (resumedAt as number) - at);
  t.comment(`counting resumed ${Math.round(waited)} ms after the promotion`);
  t.ok(waited <= RESUME_MS, `resumed within ${RESUME_MS} ms of the promotion`);
  t.equal((await get(g)).status, 200, "and goes on");
  t.ok(await throughPipe(newPort), "then through a pipe to the new primary");
});
