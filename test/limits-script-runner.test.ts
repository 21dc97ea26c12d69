// The script runner on a real redis-server: its pipe follows ioredis's connection, a runner that
// was closed (a store retired by a reload) never opens its pipe again, and a call made while the
// health check finds Redis stalled fails at once and is never sent.
import { Redis } from "ioredis";
import { pino } from "pino";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { scriptPipes, serverSettings, startTestRedis, type TestRedis } from "./helpers/redis.js";
import { systemClock } from "../src/clock.js";
import { manualClock } from "./helpers/clock.js";
import { createMetrics } from "../src/metrics.js";
import { connectRedis, type RedisConnection } from "../src/limits/redis-connection.js";
import { PIPE_CONNECTION_NAME } from "../src/limits/script-pipe.js";
import { scriptCall, type Reply } from "../src/limits/resp.js";
import { createScriptRunner, type ScriptRunner } from "../src/limits/script-runner.js";

// How long a test waits for what must happen; nothing asserts that it happened sooner.
const WAIT_MS = 30_000;

const ECHO = "return ARGV[1]";

// The reply to a call with the arguments `list`, or the reason there is none.
const run = (runner: ScriptRunner, list: Array<string | number>): Promise<Reply> =>
  runner.run(
    scriptCall(list),
    (reply) => reply,
    (error) => {
      throw error;
    },
  );

async function connected(t: Test): Promise<{ redis: TestRedis; connection: RedisConnection }> {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const connection = connectRedis(serverSettings(redis.url), {
    log: pino({ level: "silent" }),
    metrics: createMetrics(),
  });
  t.teardown(() => connection.close());
  t.ok(await eventually(async () => connection.healthy(), WAIT_MS), "connected");
  return { redis, connection };
}

function admin(t: Test, redis: TestRedis): Redis {
  const client = new Redis(redis.url);
  t.teardown(() => client.disconnect());
  return client;
}

// The ids of the named script connections on the server.
async function named(client: Redis): Promise<string[]> {
  const list = String(await client.call("CLIENT", "LIST"));
  return list
    .split("\n")
    .filter((line) => line.includes(` name=${PIPE_CONNECTION_NAME} `))
    .map((line) => (/^id=(\d+)/.exec(line) as RegExpExecArray)[1] as string);
}

t.test("a closed runner's pipe stays closed when ioredis reconnects", async (t) => {
  const { redis, connection } = await connected(t);
  const server = admin(t, redis);
  const retired = createScriptRunner(connection, ECHO, 10_000, systemClock);
  t.ok(
    await eventually(async () => {
      t.equal(await run(retired, [0, "first"]), "first");
      return scriptPipes(String(await server.call("CLIENT", "LIST"))).length === 1;
    }, WAIT_MS),
    "its calls go through its pipe",
  );
  retired.close();
  const current = createScriptRunner(connection, ECHO, 10_000, systemClock);
  t.teardown(() => current.close());
  t.ok(
    await eventually(async () => (await named(server)).length === 1, WAIT_MS),
    "the new one's pipe",
  );
  const [before] = await named(server);
  connection.client.disconnect(true);
  t.ok(
    await eventually(async () => {
      t.equal(await run(current, [0, "again"]).catch(() => "again"), "again");
      const list = String(await server.call("CLIENT", "LIST"));
      return scriptPipes(list).some((line) => !line.startsWith(`id=${before} `));
    }, WAIT_MS),
    "after the reconnection, the new runner's pipe is back, on a new connection",
  );
  t.equal((await named(server)).length, 1, "and the closed runner's is not");
});

t.test("a call while Redis is found stalled fails at once and is never sent", async (t) => {
  const { redis, connection } = await connected(t);
  const runner = createScriptRunner(connection, ECHO, 60_000, systemClock);
  t.teardown(() => runner.close());
  t.equal(await run(runner, [0, "before"]), "before");
  const server = admin(t, redis);
  const calls = async () =>
    Number(/cmdstat_evalsha:calls=(\d+)/.exec(await server.info("commandstats"))?.[1] ?? 0) +
    Number(/cmdstat_eval:calls=(\d+)/.exec(await server.info("commandstats"))?.[1] ?? 0);
  const sent = await calls();
  redis.pause();
  t.teardown(() => redis.resume());
  t.ok(await eventually(async () => !connection.healthy(), WAIT_MS), "the health check sees it");
  await t.rejects(run(runner, [0, "during"]), /health check/, "failed without waiting");
  redis.resume();
  t.ok(await eventually(async () => connection.healthy(), WAIT_MS), "answering again");
  t.equal(await calls(), sent, "the call made during the stall never reached Redis");
});

// A stalled Redis keeps its socket open; the health check needs a second without an answer to
// see it. Meanwhile the first call to time out stops the others: a request whose revoked-token
// lookup timed out does not wait a second timeout for its limits. Time is a manual clock, so the
// health check cannot be the one that noticed.
t.test("after a call times out, calls fail at once until Redis answers a PING", async (t) => {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const clock = manualClock();
  const connection = connectRedis(serverSettings(redis.url), {
    log: pino({ level: "silent" }),
    metrics: createMetrics(),
    clock,
  });
  t.teardown(() => connection.close());
  t.ok(await eventually(async () => connection.healthy(), WAIT_MS), "connected");
  const runner = createScriptRunner(connection, ECHO, 1000, clock);
  t.teardown(() => runner.close());
  t.ok(
    await eventually(async () => (await run(runner, [0, "before"])) === "before", WAIT_MS),
    "calls are answered",
  );

  redis.pause();
  t.teardown(() => redis.resume());
  const first = run(runner, [0, "first"]);
  clock.advance(1000);
  // Through the pipe (its timeout, on the manual clock) or, while the pipe is not ready yet,
  // through ioredis (its commandTimeout): either is a timeout.
  await t.rejects(first, /no answer from Redis within|Command timed out/, "the first times out");
  t.ok(connection.healthy(), "the health check has not seen the stall: still ready");
  t.notOk(connection.callable(), "but no call is sent");
  await t.rejects(run(runner, [0, "second"]), /a call timed out/, "the next fails at once");
  await t.rejects(
    connection.watched(Promise.reject(new Error("another fault"))),
    /another fault/,
    "an outcome is passed on as it is",
  );

  redis.resume();
  // The health check's timer moves with the clock: a PING is asked for again until one is answered.
  t.ok(
    await eventually(async () => {
      clock.advance(500);
      return connection.callable();
    }, WAIT_MS),
    "a PING answered: callable",
  );
  t.equal(await run(runner, [0, "after"]), "after");
});
