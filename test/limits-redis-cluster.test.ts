// The Redis store on a 3-primary Redis Cluster that the test starts: replicas sharing one limit
// through the Cluster, a slot moved to another primary (MOVED), and a primary restarted.
import { randomBytes } from "node:crypto";
import t, { type Test } from "tap";
import { generateKeyPem } from "../src/tokens/keys.js";
import { revokeWithSecret } from "./helpers/assertions.js";
import { eventually, send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected, get, readiness } from "./helpers/redis-gatehouse.js";
import { startTestCluster } from "./helpers/redis-topologies.js";
import { scriptPipes } from "./helpers/redis.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());
// One Cluster for the whole file: it takes seconds to start.
const cluster = await startTestCluster();
t.teardown(() => cluster.close());

// `timeout` long for 50 concurrent requests on a loaded machine: a slow answer would be a 503.
function config(prefix: string, limit: number, timeout = "1s"): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
    rate_limit: { limit: ${limit}, window: 1h }
limits:
  store: redis
  redis:
    cluster: [${cluster.seeds.join(", ")}]
    key_prefix: "${prefix}"
    timeout: ${timeout}
    on_outage: closed
routes:
  - path: /open
    methods: [GET]
    auth: none
`,
  );
}

async function started(t: Test, yaml: string): Promise<TestGatehouse> {
  const g = await startTestGatehouse(yaml);
  t.teardown(() => g.close());
  t.ok(await connected(g), "connected to the Cluster");
  return g;
}

const newPrefix = () => `gatehouse-test-${randomBytes(6).toString("hex")}:`;

t.test(
  "two instances on the Cluster let exactly 10 of 50 concurrent requests through",
  async (t) => {
    const yaml = config(newPrefix(), 10, "5s");
    const a = await started(t, yaml);
    const b = await started(t, yaml);
    const before = upstream.received.length;
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => get(i % 2 ? a : b)));
    const allowed = answers.filter((response) => response.status === 200);
    t.equal(allowed.length, 10, "exactly the 10 points left");
    t.equal(answers.filter((response) => response.status === 429).length, 40);
    t.equal(upstream.received.length - before, 10, "only the allowed ones were forwarded");
    t.same(
      allowed.map((response) => Number(response.headers.get("x-ratelimit-remaining"))).sort(),
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
      "each allowed request saw its own count",
    );
  },
);

t.test("each instance runs the script through its own pipe to the key's primary", async (t) => {
  const prefix = newPrefix();
  const yaml = config(prefix, 1000);
  const a = await started(t, yaml);
  const b = await started(t, yaml);
  t.equal((await get(a)).status, 200);
  const [counter] = await cluster.keys(prefix);
  const holder = (counter as { port: number }).port;
  t.ok(
    await eventually(async () => {
      t.same([(await get(a)).status, (await get(b)).status], [200, 200]);
      return scriptPipes(await cluster.clientList(holder)).length === 2;
    }, 30_000),
    "two pipes, one per instance, ran the script there",
  );
});

t.test("a slot moved to another primary: MOVED is followed and the count kept", async (t) => {
  const prefix = newPrefix();
  const g = await started(t, config(prefix, 100));
  t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "99");
  const [counter] = await cluster.keys(prefix);
  t.ok(counter, "the counter lives in the Cluster");
  const { key, port } = counter as { key: string; port: number };
  const to = cluster.ports.find((candidate) => candidate !== port) as number;
  await cluster.moveSlot(key, to);
  t.same(await cluster.keys(prefix), [{ key, port: to }], "the counter moved with its slot");
  const next = await get(g);
  t.equal(next.status, 200, "counted on the new primary");
  t.equal(next.headers.get("x-ratelimit-remaining"), "98", "where the moved counter stood");
  t.ok(
    await eventually(async () => {
      t.equal((await get(g)).status, 200);
      return scriptPipes(await cluster.clientList(to)).length === 1;
    }, 30_000),
    "then through a pipe to the new primary",
  );
});

t.test("a primary restarted: not ready while it is down, counting on it after", async (t) => {
  const prefix = newPrefix();
  const g = await started(t, config(prefix, 5));
  t.equal((await get(g)).headers.get("x-ratelimit-remaining"), "4");
  const [counter] = await cluster.keys(prefix);
  await cluster.restart((counter as { port: number }).port, async () => {
    t.ok(await eventually(async () => (await get(g)).status === 503), "closed: 503 meanwhile");
    t.ok(await eventually(async () => (await readiness(g)) === 503), "and not ready");
  });
  t.ok(await eventually(async () => (await readiness(g)) === 200, 10_000), "ready again");
  const after = await get(g);
  t.equal(after.status, 200);
  // The restarted primary saved nothing: the counter starts again, there.
  t.equal(after.headers.get("x-ratelimit-remaining"), "4", "counted on the restarted primary");
  t.same(
    (await cluster.keys(prefix)).map((found) => found.port),
    [(counter as { port: number }).port],
  );
});

t.test(
  "a revocation on the Cluster: both of its sets share one slot, and both replicas deny",
  async (t) => {
    const app = { id: "reporting-app", secret: "a3f1c9d2e8b7a6f5c4d3e2f1a0b9c8d7" };
    const yaml = config(newPrefix(), 1000).replace(
      "routes:\n",
      `tokens:\n  signing: { key_file: ./signing.pem }\n${await clientsYaml([app])}routes:\n  - path: /v1/items\n    methods: [GET]\n`,
    );
    const key = await generateKeyPem("EdDSA");
    const a = await startTestGatehouse(yaml, { files: { "signing.pem": key } });
    t.teardown(() => a.close());
    const b = await startTestGatehouse(yaml, { files: { "signing.pem": key } });
    t.teardown(() => b.close());
    t.ok((await connected(a)) && (await connected(b)), "connected to the Cluster");
    const token = await obtainToken(a.url, app);
    const call = (g: TestGatehouse) =>
      send(`${g.url}/v1/items`, { headers: { authorization: `Bearer ${token}` } });
    t.equal((await call(b)).status, 200);
    t.equal((await revokeWithSecret(a.url, app, token)).status, 200);
    t.equal((await call(a)).status, 401, "the revoking replica denies it at once");
    t.ok(await eventually(async () => (await call(b)).status === 401), "the other within a second");
  },
);
