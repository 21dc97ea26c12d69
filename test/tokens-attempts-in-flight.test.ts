/**
 * Attempts still in flight never turn a correct secret into a 429. Each token request is counted
 * against its address's failure budget while its secret is checked; when more arrive at once than
 * the budget has left, the extra ones wait for those in flight to settle instead of being refused.
 * Run through real sockets, with the memory store and with a redis-server of the test's own (the
 * in-flight attempts are counted where the failures are, so replicas see each other's). The clock
 * is manual, so a wait never runs out on a loaded machine; the wait's end is tested on its own.
 */
import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { addressKey } from "../src/limits/client-key.js";
import { manualClock, type ManualClock } from "./helpers/clock.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import { clientsYaml, form, postToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const CLIENTS: readonly TestClient[] = Array.from({ length: 10 }, (_, i) => ({
  id: `fleet-${i}`,
  secret: `a-secret-of-the-fleet-member-${i}-0123456789`,
}));

const upstream = await startUpstream();
t.teardown(() => upstream.close());

function configWith(limits: string): Promise<string> {
  return clientsYaml(CLIENTS).then((clients) =>
    configFor(
      upstream.url,
      `trusted_proxies: [127.0.0.1]
tokens:
  failure_limit: { limit: 3, window: 1m }
  verify_concurrency: 2
${clients}
${limits}routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
  );
}

async function startedWithRedis(t: Test, clock: ManualClock) {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const prefix = `gatehouse-in-flight-${randomBytes(6).toString("hex")}:`;
  const g = await startTestGatehouse(
    await configWith(`limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "${prefix}"
    timeout: 10s
`),
    { clock },
  );
  t.teardown(() => g.close());
  t.ok(await connected(g), "Redis answers");
  return { g, redis, prefix };
}

async function started(
  t: Test,
  store: "memory" | "redis",
  clock: ManualClock,
): Promise<TestGatehouse> {
  if (store === "redis") return (await startedWithRedis(t, clock)).g;
  const g = await startTestGatehouse(await configWith(""), { clock });
  t.teardown(() => g.close());
  return g;
}

const attempt = (g: TestGatehouse, ip: string, client: TestClient, secret = client.secret) =>
  postToken(g.url, {
    headers: { "x-forwarded-for": ip },
    body: form([
      ["client_id", client.id],
      ["client_secret", secret],
    ]),
  });

/** The statuses of `clients`' token requests, all sent at once from `ip`. */
async function atOnce(g: TestGatehouse, ip: string, clients: readonly TestClient[]) {
  const answers = await Promise.all(clients.map((client) => attempt(g, ip, client)));
  return answers.map((answer) => answer.status);
}

for (const store of ["memory", "redis"] as const) {
  t.test(`${store} store: correct logins at once from one address are never 429`, async (t) => {
    const g = await started(t, store, manualClock());
    const ip = "198.51.100.20";
    const twelve = await atOnce(g, ip, Array<TestClient>(12).fill(CLIENTS[0] as TestClient));
    t.strictSame(twelve, Array(12).fill(200), "12 logins of one client, with a budget of 3");
    // Thirty logins of ten clients whose secrets were never checked: each one needs its own
    // check, so most of them wait for a turn in the budget.
    const fleet = Array.from({ length: 30 }, (_, i) => CLIENTS[i % 10] as TestClient);
    t.strictSame(await atOnce(g, ip, fleet), Array(30).fill(200), "30 logins of 10 clients");

    // Nothing is left in flight: the whole budget is there for failures, and then used up.
    const other = CLIENTS[1] as TestClient;
    t.equal((await attempt(g, ip, other, "wrong-1")).status, 401);
    t.equal((await attempt(g, ip, other, "wrong-2")).status, 401);
    t.equal((await attempt(g, ip, other)).status, 200, "2 failures of 3: still a token");
    t.equal((await attempt(g, ip, other, "wrong-3")).status, 401, "the 3rd failure: 401");
    const refused = await attempt(g, ip, other, "wrong-4");
    t.equal(refused.status, 429, "then any secret not remembered is 429");
    t.equal(refused.json.error, "rate_limited");
    t.equal((await attempt(g, ip, other)).status, 200, "the one remembered as correct is not");
  });
}

// Another replica's attempts in flight hold the budget (written into Redis as that replica
// counts them); no settle in this process announces their end, so a correct secret waits a
// second, tries once more, and is answered 503 with Retry-After: 1 rather than 429.
t.test("another replica's attempts in flight: a wait, then 503, never 429", async (t) => {
  const clock = manualClock();
  const { g, redis, prefix } = await startedWithRedis(t, clock);
  const ip = "198.51.100.31";
  const key = (slot: string) => `${prefix}{${addressKey(ip)}}:${slot}:ip:60000`;
  const client = new Redis(redis.url);
  t.teardown(() => client.quit());
  // One failure happened; two attempts are being checked elsewhere: the budget of 3 is held.
  await client.set(key("auth-failures"), "3", "PX", 60_000);
  await client.set(key("auth-in-flight"), "2", "PX", 60_000);

  let answered = false;
  const pending = attempt(g, ip, CLIENTS[3] as TestClient).finally(() => (answered = true));
  // The clock moves only here, in small steps, until the request is answered: the wait ends by
  // the clock, whatever the machine's load.
  let moved = 0;
  while (!answered) {
    clock.advance(50);
    moved += 50;
    await new Promise((done) => setTimeout(done, 5));
  }
  const held = await pending;
  t.equal(held.status, 503, "crowded for a second: 503");
  t.equal(held.headers["retry-after"], "1");
  t.equal(held.json.error, "temporarily_unavailable");
  t.ok(moved >= 1000, `answered after the wait of a second (${moved} ms moved)`);

  // The other replica settles one attempt as a success: the budget has room again.
  await client.decr(key("auth-failures"));
  await client.decr(key("auth-in-flight"));
  t.equal((await attempt(g, ip, CLIENTS[3] as TestClient)).status, 200, "then a token");
});
