import t from "tap";
import { Redis } from "ioredis";
import { difference, perRequest, redisStats, summedStats } from "../bench/redis-info.js";
import { startTestRedis } from "./helpers/redis.js";

t.test(
  "the bench counts a real Redis's scripts and commands, and leaves its own INFO out",
  async (t) => {
    const server = await startTestRedis();
    const client = new Redis(server.url);
    t.teardown(async () => {
      client.disconnect();
      await server.close();
    });
    const before = await redisStats(client);
    const script = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    await client.eval(script, 1, "bench:key", 2);
    const sha = (await client.script("LOAD", script)) as string;
    await client.evalsha(sha, 1, "bench:key", 3);
    await client.evalsha(sha, 1, "bench:key", 4);
    await client.get("bench:key");
    const work = difference(before, await redisStats(client));

    t.equal(work.scripts, 3, "one EVAL and two EVALSHA");
    t.equal(work.calls.get("incrby"), 3, "commands run inside a script are counted by name");
    t.equal(work.calls.get("get"), 1);
    t.notOk(work.calls.has("info"), "the bench's own INFO is not Redis's work for gatehouse");
    t.ok(work.cpuUs >= 0, "Redis's CPU time does not go backwards");
    t.equal(perRequest(work.calls, 2).split(", ")[0], "incrby 1.500", "most frequent first");
  },
);

t.test("a Cluster's figures are its servers' added together, command by command", async (t) => {
  const first = {
    calls: new Map([
      ["evalsha", 3],
      ["get", 1],
    ]),
    cpuS: 0.5,
  };
  const second = {
    calls: new Map([
      ["evalsha", 4],
      ["incrby", 2],
    ]),
    cpuS: 0.25,
  };
  const total = summedStats([first, second]);
  t.same([...total.calls].sort(), [
    ["evalsha", 7],
    ["get", 1],
    ["incrby", 2],
  ]);
  t.equal(total.cpuS, 0.75);
  t.equal(difference(first, total).scripts, 4, "the second server's scripts");
});
