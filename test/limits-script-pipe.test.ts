// The script pipe against a real redis-server: the calls of one turn go in one write and come back
// matched in order, the script is loaded when the connection opens and sent whole when the server
// lost it, an error reply fails only its own call, a call without an answer in time fails on the
// pipe's clock without putting later replies out of step, and a lost connection fails what was in
// flight and is made again.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { Socket } from "node:net";
import { Redis } from "ioredis";
import t, { type Test } from "tap";
import { eventually } from "./helpers/client.js";
import { manualClock, type ManualClock } from "./helpers/clock.js";
import { startTestRedis, type TestRedis } from "./helpers/redis.js";
import { startAclRedis } from "./helpers/redis-topologies.js";
import { systemClock, type Clock } from "../src/clock.js";
import { ReplyError, scriptCall } from "../src/limits/resp.js";
import {
  createScriptPipe,
  PIPE_CONNECTION_NAME,
  PipeClosed,
  PipeTimeout,
  type PipeTarget,
  type ScriptPipe,
} from "../src/limits/script-pipe.js";

// Answers its first argument, or an error reply when that is "fail".
const ECHO = `if ARGV[1] == 'fail' then return redis.error_reply('ERR asked to fail') end
return {ARGV[1], #KEYS}`;

// How long a test waits for what must happen; nothing asserts that it happened sooner.
const WAIT_MS = 30_000;

const target = (port: number, more: Partial<PipeTarget> = {}): PipeTarget => ({
  host: "127.0.0.1",
  port,
  username: undefined,
  password: undefined,
  db: 0,
  tls: undefined,
  ...more,
});

// Moves `clock` a second at a time until `probe` holds (false if it never does).
const advancing = (clock: ManualClock, probe: () => Promise<boolean>) =>
  eventually(async () => {
    clock.advance(1000);
    return probe();
  }, WAIT_MS);

async function server(t: Test): Promise<{ redis: TestRedis; admin: Redis }> {
  const redis = await startTestRedis();
  const admin = new Redis(redis.url);
  t.teardown(async () => {
    admin.disconnect();
    await redis.close();
  });
  return { redis, admin };
}

async function openPipe(
  t: Test,
  to: PipeTarget,
  clock: Clock = systemClock,
  timeoutMs = 10_000,
): Promise<ScriptPipe> {
  const pipe = createScriptPipe(ECHO, timeoutMs, clock);
  t.teardown(() => pipe.close());
  pipe.open(to);
  t.ok(await eventually(async () => pipe.ready, WAIT_MS), "the pipe is ready");
  return pipe;
}

// Redis's count of calls of `command` (evalsha, eval) since it started.
async function calls(admin: Redis, command: string): Promise<number> {
  const stats = await admin.info("commandstats");
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

// The line of `CLIENT LIST` for the pipe's connection.
async function pipeClient(admin: Redis): Promise<string | undefined> {
  const list = String(await admin.call("CLIENT", "LIST"));
  return list.split("\n").find((line) => line.includes(` name=${PIPE_CONNECTION_NAME} `));
}

t.test("the calls of one turn share a write and get their own answers", async (t) => {
  const { redis, admin } = await server(t);
  // The sockets Node creates meanwhile (the pipe's and ioredis's), and the writes on the pipe's.
  const sockets: Socket[] = [];
  const created = (message: unknown): void =>
    void sockets.push((message as { socket: Socket }).socket);
  subscribe("net.client.socket", created);
  let pipe: ScriptPipe;
  try {
    pipe = await openPipe(t, target(redis.port));
  } finally {
    unsubscribe("net.client.socket", created);
  }
  // Redis names the pipe's connection and its address: that is the socket to watch.
  const port = Number(/ addr=127\.0\.0\.1:(\d+) /.exec((await pipeClient(admin)) ?? "")?.[1]);
  const socket = sockets.find((created) => created.localPort === port);
  if (socket === undefined) throw new Error(`no socket created for the pipe's port ${port}`);
  const write = socket.write;
  let writes = 0;
  socket.write = function (this: Socket, ...args: Parameters<Socket["write"]>) {
    writes++;
    return write.apply(this, args);
  } as Socket["write"];
  t.teardown(() => void (socket.write = write));
  const answers = await Promise.all(
    Array.from({ length: 500 }, (_, i) => pipe.call(scriptCall([1, `k{${i}}`, `answer ${i}`]))),
  );
  t.equal(writes, 1, "500 calls of one turn went out in one write on the pipe's socket");
  t.strictSame(
    answers,
    Array.from({ length: 500 }, (_, i) => [`answer ${i}`, 1]),
  );
  t.strictSame(await pipe.call(scriptCall([0, "alone"])), ["alone", 0]);
  t.equal(writes, 2, "a call of a later turn gets a write of its own");
  t.equal(await calls(admin, "evalsha"), 501, "by EVALSHA: the script was loaded on connecting");
  t.equal(await calls(admin, "eval"), 0);
  t.match(await pipeClient(admin), /cmd=evalsha/, "the connection is named in CLIENT LIST");
});

t.test("calls of one turn in ASCII and beyond it reach Redis byte for byte", async (t) => {
  const { redis } = await server(t);
  const pipe = await openPipe(t, target(redis.port));
  const texts = ["plain", "é 漢字 🚦", "also plain", "k{ü}"];
  const answers = await Promise.all(texts.map((text) => pipe.call(scriptCall([0, text]))));
  t.strictSame(
    answers,
    texts.map((text) => [text, 0]),
  );
  t.strictSame(await pipe.call(scriptCall([0, "ASCII again"])), ["ASCII again", 0]);
});

t.test("a server that lost the script is sent it whole", async (t) => {
  const { redis, admin } = await server(t);
  const pipe = await openPipe(t, target(redis.port));
  await admin.call("SCRIPT", "FLUSH");
  t.strictSame(await pipe.call(scriptCall([0, "after a flush"])), ["after a flush", 0]);
  t.equal(await calls(admin, "eval"), 1, "once by EVAL");
  t.strictSame(await pipe.call(scriptCall([0, "then"])), ["then", 0]);
  t.equal(await calls(admin, "eval"), 1, "then by EVALSHA again");
});

t.test("an error reply fails its own call only", async (t) => {
  const { redis } = await server(t);
  const pipe = await openPipe(t, target(redis.port));
  const [before, failed, after] = await Promise.allSettled([
    pipe.call(scriptCall([0, "before"])),
    pipe.call(scriptCall([0, "fail"])),
    pipe.call(scriptCall([0, "after"])),
  ]);
  t.strictSame(before, { status: "fulfilled", value: ["before", 0] });
  t.equal(failed?.status, "rejected");
  t.type((failed as PromiseRejectedResult).reason, ReplyError);
  t.strictSame(after, { status: "fulfilled", value: ["after", 0] });
});

t.test("a call unanswered in time fails; the late answer goes to nobody", async (t) => {
  const { redis } = await server(t);
  const clock = manualClock();
  const pipe = await openPipe(t, target(redis.port), clock, 1000);
  redis.pause();
  t.teardown(() => redis.resume());
  const stalled = pipe.call(scriptCall([0, "stalled"]));
  clock.advance(999);
  const later = pipe.call(scriptCall([0, "later"]));
  clock.advance(1);
  await t.rejects(stalled, PipeTimeout, "failed at its deadline, on the pipe's clock");
  let laterSettled = false;
  void later.finally(() => (laterSettled = true));
  await new Promise((done) => setImmediate(done));
  t.notOk(laterSettled, "a call with time left is still waiting");
  redis.resume();
  t.strictSame(await later, ["later", 0], "its own answer, not the stalled call's");
  t.strictSame(await pipe.call(scriptCall([0, "next"])), ["next", 0]);
});

t.test("a lost connection fails the calls in flight and is made again", async (t) => {
  const { redis } = await server(t);
  const clock = manualClock();
  const pipe = await openPipe(t, target(redis.port), clock);
  redis.pause();
  const inFlight = pipe.call(scriptCall([0, "in flight"])).catch((error: unknown) => error);
  await redis.restart();
  t.type(await inFlight, PipeClosed, "failed, never sent again: it may have run");
  t.notOk(pipe.ready, "not ready while the connection is down");
  t.ok(await advancing(clock, async () => pipe.ready), "ready again after the reconnection delay");
  t.strictSame(await pipe.call(scriptCall([0, "again"])), ["again", 0]);
});

t.test("a refused password leaves the pipe closed; the right one opens it", async (t) => {
  const acl = await startAclRedis("gatehouse", "right-password");
  t.teardown(() => acl.close());
  const clock = manualClock();
  const wrong = createScriptPipe(ECHO, 10_000, clock);
  t.teardown(() => wrong.close());
  wrong.open(target(acl.port, { username: "gatehouse", password: "wrong-password" }));
  const admin = new Redis({ port: acl.port, username: "gatehouse", password: "right-password" });
  t.teardown(() => admin.disconnect());
  // Failed authentications, from the server's ACL log (repeats are counted in one entry).
  const refusals = async () => {
    const entries = (await admin.call("ACL", "LOG")) as Array<Array<string | number>>;
    let count = 0;
    for (const entry of entries) {
      const field = (name: string) => entry[entry.indexOf(name) + 1];
      if (field("reason") === "auth") count += Number(field("count"));
    }
    return count;
  };
  t.ok(
    await advancing(clock, async () => (await refusals()) >= 3),
    "refused, then tried again after the reconnection delay",
  );
  t.notOk(wrong.ready, "never ready with a refused password");
  const right = await openPipe(
    t,
    target(acl.port, { username: "gatehouse", password: "right-password" }),
  );
  t.strictSame(await right.call(scriptCall([0, "in"])), ["in", 0]);
});

t.test("a closed pipe stays closed", async (t) => {
  const { redis, admin } = await server(t);
  const clock = manualClock();
  const pipe = await openPipe(t, target(redis.port), clock);
  pipe.close();
  t.notOk(pipe.ready);
  clock.advance(10_000);
  t.ok(
    await eventually(async () => (await pipeClient(admin)) === undefined, WAIT_MS),
    "its connection is gone from the server and not made again",
  );
});
