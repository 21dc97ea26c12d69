/**
 * A Redis database chosen in the URL (`redis://host:6379/2`): every count lands in that database,
 * through ioredis's connection and the script pipes beside it, and none in database 0.
 */
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { connected, get } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import { redisCli } from "./helpers/redis-topologies.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
const redis = await startTestRedis();
t.teardown(async () => {
  await upstream.close();
  await redis.close();
});

t.test("the database in the URL holds the counts", async (t) => {
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `plans:
  anonymous:
    rate_limit: { limit: 3, window: 1h }
limits:
  store: redis
  redis:
    url: ${redis.url}/2
    key_prefix: "gh-db:"
    timeout: 1s
    on_outage: closed
routes:
  - path: /open
    methods: [GET]
    auth: none
`,
    ),
  );
  t.teardown(() => g.close());
  t.ok(await connected(g), "connected to Redis");
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) statuses.push((await get(g)).status);
  t.strictSame(statuses, [200, 200, 200, 429], "counted, and the fourth refused");
  const keys = (db: string) => redisCli(redis.port, ["-n", db, "--scan", "--pattern", "gh-db:*"]);
  t.not(await keys("2"), "", "database 2 holds gatehouse's keys");
  t.equal(await keys("0"), "", "database 0 holds none");
});
