// The Redis store over TLS, verified with a CA the test makes (openssl): one TLS-only server,
// checked under tls.server_name, and a Cluster whose nodes speak only TLS, so that every node
// connection is proved to use it. Skipped, with the reason, where TLS cannot be tried.
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected, get } from "./helpers/redis-gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { SERVER_NAME, startTlsRedis, tlsUnavailable } from "./helpers/redis-tls.js";
import { startTestCluster } from "./helpers/redis-topologies.js";
import { scriptPipes } from "./helpers/redis.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const skip = (await tlsUnavailable()) ?? false;

function config(where: string, serverName = ""): string {
  return configFor(
    upstream.url,
    `plans:
  anonymous:
    rate_limit: { limit: 1000, window: 1h }
limits:
  store: redis
  redis:
${where}
    tls:
      ca_file: redis-ca.pem
      server_name: "${serverName}"
    key_prefix: "gatehouse-test-${randomBytes(6).toString("hex")}:"
    timeout: 1s
    on_outage: closed
routes:
  - path: /open
    methods: [GET]
    auth: none
`,
  );
}

async function started(t: Test, yaml: string, ca: string): Promise<TestGatehouse> {
  const g = await startTestGatehouse(yaml, { files: { "redis-ca.pem": ca } });
  t.teardown(() => g.close());
  return g;
}

async function counts(t: Test, g: TestGatehouse): Promise<void> {
  t.ok(await connected(g), "connected over TLS");
  const response = await get(g);
  t.equal(response.status, 200);
  t.equal(response.headers.get("x-ratelimit-remaining"), "999", "counted in Redis");
}

// Requests until the script goes through a pipe over TLS: `clientLists` reads every node's list.
async function throughPipes(t: Test, g: TestGatehouse, clientLists: () => Promise<string[]>) {
  t.ok(
    await eventually(async () => {
      t.equal((await get(g)).status, 200);
      return (await clientLists()).some((list) => scriptPipes(list).length > 0);
    }, 30_000),
    "the script goes through a pipe, over TLS",
  );
}

t.test(
  "one server: verified with ca_file, under the certificate's server_name",
  { skip },
  async (t) => {
    const redis = await startTlsRedis();
    t.teardown(() => redis.close());
    const named = await started(t, config(`    url: ${redis.url}`, SERVER_NAME), redis.ca);
    await counts(t, named);
    const admin = new Redis(redis.url, { tls: { ca: redis.ca, servername: SERVER_NAME } });
    t.teardown(() => admin.disconnect());
    await throughPipes(t, named, async () => [String(await admin.call("CLIENT", "LIST"))]);
    // The certificate names only SERVER_NAME, not 127.0.0.1: without server_name the
    // verification fails, so the name is what was checked.
    const unnamed = await started(t, config(`    url: ${redis.url}`), redis.ca);
    t.ok(
      await eventually(async () =>
        unnamed.logs.some((line) => JSON.stringify(line.err ?? "").includes("altnames")),
      ),
      "without server_name the certificate is refused",
    );
    t.equal(await metric(unnamed, "gatehouse_limiter_store_up"), 0);
    t.equal((await get(unnamed)).status, 503);
  },
);

t.test(
  "a Cluster whose nodes speak only TLS: every node connection uses it",
  { skip },
  async (t) => {
    const cluster = await startTestCluster({ tls: true });
    t.teardown(() => cluster.close());
    const g = await started(
      t,
      config(`    cluster: [${cluster.seeds.join(", ")}]`),
      cluster.ca as string,
    );
    await counts(t, g);
    await throughPipes(t, g, () => Promise.all(cluster.ports.map(cluster.clientList)));
  },
);
