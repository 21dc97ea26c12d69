/**
 * The Redis store: counters shared by every replica that names the same Redis and key prefix.
 * A request's batch is one Lua script, so every limit is checked and committed in one atomic
 * step and one round trip; all the keys of a subject share one Redis Cluster hash tag
 * (`<prefix>{<subject>}:<counter>`), so the script's keys live on one node. Every call is bounded
 * by `redis.timeout`; while Redis is down or slow, `on_outage` decides: `local` counts in this
 * process's memory instead, `open` and `closed` let the call fail and leave the answer to the
 * limits stage. What Redis counted is only ever corrected in Redis, and what the fallback counted
 * only in the fallback.
 */
import { Cluster, type Redis } from "ioredis";
import type { Clock } from "../clock.js";
import type { Metrics } from "../metrics.js";
import {
  slotEnd,
  type Counted,
  type CounterStore,
  type SharedMarks,
  type Slot,
} from "./counters.js";
import { createRedisSlots } from "./redis-slots.js";
import { createLocalBlocks } from "./local-blocks.js";
import { createMemoryStore, type MemoryStore } from "./memory-store.js";
import type { RedisSettings } from "./plans.js";
import { notCallable, type RedisConnection } from "./redis-connection.js";
import { bulk, isAscii, type Reply, type ScriptCall } from "./resp.js";
import { createScriptRunner, type ScriptRunner } from "./script-runner.js";

/**
 * KEYS: the counters. ARGV: cost, force (1/0), then each counter's limit, then each one's
 * lifetime in ms for a counter created now. Reads every counter; when each has room for the cost
 * (or force), adds it to all of them. A cost of 0 only reads; a negative cost takes points back
 * from counters that exist, never below 0. Answers: added (1/0), the counts, the PTTLs.
 */
const COUNT_SCRIPT = `
local cost = tonumber(ARGV[1])
local n = #KEYS
local out = {0}
local room = true
for i = 1, n do
  local v = tonumber(redis.call('GET', KEYS[i]) or '0')
  out[1 + i] = v
  if v + cost > tonumber(ARGV[2 + i]) then room = false end
end
if cost ~= 0 and (room or ARGV[2] == '1') then
  out[1] = 1
  for i = 1, n do
    if cost > 0 then
      out[1 + i] = redis.call('INCRBY', KEYS[i], cost)
    elseif out[1 + i] > 0 then
      out[1 + i] = redis.call('DECRBY', KEYS[i], math.min(-cost, out[1 + i]))
    end
  end
end
for i = 1, n do
  local t = redis.call('PTTL', KEYS[i])
  if t == -1 then
    t = tonumber(ARGV[2 + n + i])
    redis.call('PEXPIRE', KEYS[i], t)
  end
  out[1 + n + i] = t
end
return out
`;

// KEYS[1]: the revoked ids, a sorted set scored by each id's end; KEYS[2]: the same for the ids
// one client revoked. ARGV: now, the end, the id, the most a client may hold. Ended ids are dropped
// as a new one is added, so the sets hold only ids still in force, and Redis deletes a set once it
// is empty. A client at its most is refused (0) unless the id is one it holds already.
const REVOKE_SCRIPT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[2], ARGV[3]) and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], 'GT', ARGV[2], ARGV[3])
return 1
`;

/**
 * The shared marks over `connection` under `prefix`: an id used once is a key set with NX and an
 * expiry at its end, under its subject's hash tag; the revoked ids are one sorted set. Each call
 * fails at once while the connection is not callable, else within `redis.timeout`.
 */
function sharedMarks(connection: RedisConnection, prefix: string, metrics: Metrics): SharedMarks {
  const { client, callable, watched } = connection;
  const revokedKey = `${prefix}{revoked}:jti`;
  const reachable = (): void => {
    if (!callable()) throw notCallable();
    metrics.limiterRoundTrips.inc();
  };
  return {
    async markOnce(subject, id, untilMs, nowMs) {
      reachable();
      const key = `${prefix}{${subject}}:once:${id}`;
      // PX takes whole milliseconds only; a fraction would be refused as no integer.
      const ttl = Math.max(1, Math.ceil(untilMs - nowMs));
      return (await watched(client.set(key, "1", "PX", ttl, "NX"))) === "OK";
    },
    async revoke(subject, id, untilMs, nowMs, most) {
      reachable();
      // Under the {revoked} hash tag with the set of all, so one script on a Cluster sees both.
      const ofSubject = `${prefix}{revoked}:${subject}`;
      const args = [nowMs, untilMs, id, most];
      return (await watched(client.eval(REVOKE_SCRIPT, 2, revokedKey, ofSubject, ...args))) === 1;
    },
    async revoked(nowMs) {
      reachable();
      const flat = await watched(
        client.zrangebyscore(revokedKey, `(${nowMs}`, "+inf", "WITHSCORES"),
      );
      const ids = new Map<string, number>();
      for (let i = 0; i + 1 < flat.length; i += 2) ids.set(flat[i] as string, Number(flat[i + 1]));
      return ids;
    },
  };
}

const noop = (): void => undefined;

/** A Redis store; `close` stops its fallback's background sweep and its reset subscription. */
export type RedisStore = CounterStore & { close(): void };

/** The key of one counter in Redis. */
export function redisKey(prefix: string, subject: string, slot: Slot): string {
  return `${prefix}{${subject}}:${slot.name}`;
}

/** One batch: `cost` points for `subject` on each of `slots` at `nowMs`, or none. */
export interface Batch {
  readonly subject: string;
  readonly slots: readonly Slot[];
  readonly cost: number;
  /** Added even where a counter has no room. */
  readonly force: boolean;
  readonly nowMs: number;
}

/** The script's arguments for `batch`: the number of keys, the keys, then ARGV. */
export function scriptArgs(prefix: string, batch: Batch): Array<string | number> {
  const { subject, slots, cost, force, nowMs } = batch;
  const args: Array<string | number> = [slots.length];
  for (const slot of slots) args.push(redisKey(prefix, subject, slot));
  args.push(cost, force ? 1 : 0);
  for (const slot of slots) args.push(slot.limit);
  for (const slot of slots) args.push(lifetime(slot, nowMs));
  return args;
}

// How long a counter created at `nowMs` lives, in ms.
function lifetime(slot: Slot, nowMs: number): number {
  return Math.max(1, slotEnd(slot, nowMs) - nowMs);
}

/** A subject's keys for one set of counters, encoded. */
interface EncodedKeys {
  readonly first: string;
  /** The number of keys and the keys. */
  readonly keys: string;
  /** The counters' limits. */
  readonly limits: string;
  readonly ascii: boolean;
}

/** Subjects whose encoded keys are kept per set of counters; beyond, the set starts again. */
export const KEPT_SUBJECTS = 10_000;

/**
 * The script's arguments for batches as a pipe writes them. A request's batch differs from the
 * last one of its client only in the counters' lifetimes, so the rest (the keys and the limits)
 * is encoded once per subject and set of counters and kept: most of a call's encoding is then
 * one lookup.
 */
export function createBatchEncoder(prefix: string) {
  const bySlots = new WeakMap<
    readonly Slot[],
    { readonly limits: string; readonly subjects: Map<string, EncodedKeys> }
  >();
  const keysOf = (subject: string, slots: readonly Slot[]): EncodedKeys => {
    let kept = bySlots.get(slots);
    if (kept === undefined) {
      kept = { limits: slots.map((slot) => bulk(slot.limit)).join(""), subjects: new Map() };
      bySlots.set(slots, kept);
    }
    let keys = kept.subjects.get(subject);
    if (keys === undefined) {
      const names = slots.map((slot) => redisKey(prefix, subject, slot));
      const text = bulk(slots.length) + names.map(bulk).join("");
      const { limits } = kept;
      keys = { first: names[0] ?? "", keys: text, limits, ascii: isAscii(text) };
      if (kept.subjects.size >= KEPT_SUBJECTS) kept.subjects.clear();
      kept.subjects.set(subject, keys);
    }
    return keys;
  };
  return (batch: Batch): ScriptCall => {
    const { subject, slots, cost, force, nowMs } = batch;
    const keys = keysOf(subject, slots);
    let encoded = keys.keys + bulk(cost) + (force ? "$1\r\n1\r\n" : "$1\r\n0\r\n") + keys.limits;
    for (const slot of slots) encoded += bulk(lifetime(slot, nowMs));
    return {
      count: 3 + 3 * slots.length,
      encoded,
      ascii: keys.ascii,
      key: keys.first,
      args: () => scriptArgs(prefix, batch),
    };
  };
}

/** The batch's result from the script's answer, counted at `nowMs`. */
function countedFrom(answer: Reply, slots: readonly Slot[], nowMs: number): Counted {
  if (!Array.isArray(answer)) throw new Error(`the count script answered ${String(answer)}`);
  const reply = answer as readonly number[];
  const n = slots.length;
  const counts: number[] = [];
  const endsAt: number[] = [];
  for (let i = 0; i < n; i++) {
    counts.push(Number(reply[1 + i]));
    // A PTTL below zero: there is no counter, and one created now would end a window from now.
    const ttl = Number(reply[1 + n + i]);
    endsAt.push(ttl >= 0 ? nowMs + ttl : slotEnd(slots[i] as Slot, nowMs));
  }
  return { added: reply[0] === 1, counts, endsAt, where: "store" };
}

/**
 * Runs one batch in Redis through `script`: `counted` gets what the batch found, `failed` why it
 * found nothing (an answer the script cannot give included), each in the turn the answer came.
 */
function batchRunner(script: ScriptRunner, prefix: string) {
  const encode = createBatchEncoder(prefix);
  return <T>(
    batch: Batch,
    counted: (found: Counted) => T,
    failed: (error: unknown) => T,
  ): Promise<T> =>
    script.run(
      encode(batch),
      (reply) => {
        let found: Counted;
        try {
          found = countedFrom(reply, batch.slots, batch.nowMs);
        } catch (error) {
          return failed(error);
        }
        return counted(found);
      },
      failed,
    );
}

/**
 * A second connection to the same Redis that subscribes to `channel` each time it is ready and
 * passes each message on `channel` to `onMessage`; its errors are ignored. ioredis's own
 * resubscription on a reconnection is off: it leaves its promise unhandled, and a connection lost
 * during it would end the process. A Cluster's subscriber catches its own.
 */
function subscribe(
  client: Redis | Cluster,
  channel: string,
  onMessage: (message: string) => void,
): Redis | Cluster {
  const subscriber: Redis | Cluster =
    client instanceof Cluster ? client.duplicate() : client.duplicate({ autoResubscribe: false });
  subscriber.on("error", () => undefined);
  subscriber.on("ready", () => void subscriber.subscribe(channel).catch(() => undefined));
  subscriber.on("message", (from: string, message: string) => {
    if (from === channel) onMessage(message);
  });
  return subscriber;
}

/**
 * A store over `connection` with the key prefix and outage policy of `settings`. Counters live
 * in Redis, so two stores with the same prefix share them.
 */
export function createRedisStore(
  connection: RedisConnection,
  settings: RedisSettings,
  metrics: Metrics,
  now: () => number,
  clock: Clock,
): RedisStore {
  const { client } = connection;
  const script = createScriptRunner(connection, COUNT_SCRIPT, settings.timeoutMs, clock);
  const fallback: MemoryStore | undefined =
    settings.onOutage === "local"
      ? createMemoryStore({ now, where: "fallback", clock })
      : undefined;
  const blocks = createLocalBlocks(now, clock);
  // Resets made by any replica reach this one's record of refusals through Redis pub/sub.
  const resetChannel = `${settings.keyPrefix}resets`;
  const resets = subscribe(connection.client, resetChannel, (subject) => blocks.forget(subject));

  const run = batchRunner(script, settings.keyPrefix);
  const slots = createRedisSlots({ connection, settings, metrics, now, clock });
  // Redis did not answer: the fallback counts under `local`; otherwise the limits stage decides.
  const orFallback = (error: unknown, counting: (store: MemoryStore) => Counted): Counted => {
    if (fallback === undefined) throw error;
    metrics.limiterFallbacks.inc();
    return counting(fallback);
  };

  return {
    healthy: connection.healthy,
    shared: sharedMarks(connection, settings.keyPrefix, metrics),
    slots,
    commit(subject, slots, cost, force, nowMs) {
      if (!force) {
        const blocked = blocks.check(subject, slots, cost, nowMs);
        if (blocked !== undefined) {
          metrics.limiterLocalBlocks.inc();
          return blocked;
        }
      }
      metrics.limiterRoundTrips.inc();
      return run(
        { subject, slots, cost, force, nowMs },
        (counted) => {
          if (!counted.added) blocks.record(subject, slots, cost, counted);
          return counted;
        },
        (error) => orFallback(error, (store) => store.commit(subject, slots, cost, force, nowMs)),
      );
    },
    read(subject, slots, nowMs, forRequest = true) {
      if (forRequest) metrics.limiterRoundTrips.inc();
      return run(
        { subject, slots, cost: 0, force: false, nowMs },
        (counted) => counted,
        (error) => orFallback(error, (store) => store.read(subject, slots, nowMs)),
      );
    },
    async takeBack(subject, slots, points, where, nowMs) {
      if (where === "fallback") {
        await fallback?.takeBack(subject, slots, points, where, nowMs);
        return;
      }
      // Counted in Redis, so taken back in Redis or not at all: never credited to the fallback.
      metrics.limiterRoundTrips.inc();
      const batch = { subject, slots, cost: -points, force: true, nowMs };
      await run(batch, noop, noop);
    },
    async reset(subject, slots) {
      blocks.forget(subject);
      await fallback?.reset(subject, slots);
      if (slots.length === 0) return;
      await client.del(...slots.map((slot) => redisKey(settings.keyPrefix, subject, slot)));
      // Every replica forgets its record of refusals for the subject, or it would go on
      // refusing the client until the window it remembers ends.
      await client.publish(resetChannel, subject);
    },
    close() {
      slots.close();
      fallback?.close();
      blocks.close();
      script.close();
      resets.disconnect();
    },
  };
}
