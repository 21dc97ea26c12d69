/**
 * Runs the store's Lua script where its keys live. ioredis finds Redis (one server, the primary
 * Sentinel names, the slot map of a Cluster), follows failovers and reshardings, and says when a
 * server is ready or gone; the script itself travels through a pipe of gatehouse's own to that
 * server (`script-pipe.ts`), which costs a request far less CPU. Whenever no pipe is ready for the
 * keys, and for a call Redis answered with an error (MOVED, ASK, READONLY: not run), the call goes
 * through ioredis instead, which handles those answers.
 */
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import type { ConnectionOptions, TLSSocket } from "node:tls";
import { Cluster, type Redis } from "ioredis";
import type { Clock } from "../clock.js";
import { notCallable, type RedisConnection } from "./redis-connection.js";
import { ReplyError, type Reply, type ScriptCall } from "./resp.js";
import { createScriptPipe, scriptSha, type PipeTarget, type ScriptPipe } from "./script-pipe.js";

// The Cluster hash slot of a key (CRC16 of its hash tag), as ioredis computes it.
const keySlot = createRequire(import.meta.url)("cluster-key-slot") as (key: string) => number;

type ScriptClient = Record<string, (...args: ReadonlyArray<string | number>) => Promise<Reply>>;

/** One Lua script, run on a connection's servers. */
export interface ScriptRunner {
  /**
   * Runs the script with the arguments of `script`; settles with what `answered` makes of the
   * reply, or `failed` of why there is none. Both are called in the turn the outcome is known,
   * so a request waits for no more than its reply.
   */
  run<T>(
    script: ScriptCall,
    answered: (reply: Reply) => T,
    failed: (error: unknown) => T,
  ): Promise<T>;
  /** Closes the pipes; ioredis's connection is its owner's to close. */
  close(): void;
}

// The TLS settings of a pipe to where `stream` is connected: the connection's own, with the
// server name ioredis's socket used (a Sentinel names the primary by address).
function tlsOf(options: { tls?: ConnectionOptions }, stream: Socket | undefined) {
  if (options.tls === undefined) return undefined;
  const sent = (stream as TLSSocket | undefined)?.servername;
  return typeof sent === "string" && options.tls.servername === undefined
    ? { ...options.tls, servername: sent }
    : options.tls;
}

/** Where a pipe beside ioredis's connection `redis` (connected) connects, and as whom. */
function targetOf(redis: Redis, host: string | undefined): PipeTarget {
  const { options, stream } = redis;
  return {
    host: host ?? options.host ?? "127.0.0.1",
    port: (host === undefined ? options.port : stream.remotePort) ?? 6379,
    // ioredis keeps "no user" and "no password" as null.
    username: options.username ?? undefined,
    password: options.password ?? undefined,
    db: options.db ?? 0,
    tls: tlsOf(options, stream),
  };
}

/** The pipes of a runner: the one that carries calls for a key now, if any is ready. */
interface Pipes {
  pipeFor(key: string): ScriptPipe | undefined;
  /** Closes every pipe and stops following the connection. */
  close(): void;
}

// What the followed events pass: nothing, or the node that left a Cluster.
type Listener = (node: Redis) => void;

/** Adds `listeners` to `emitter`; the function returned removes them. */
function follow(emitter: Redis | Cluster, listeners: Record<string, Listener>): () => void {
  for (const [event, listener] of Object.entries(listeners)) emitter.on(event, listener);
  return () => {
    for (const [event, listener] of Object.entries(listeners)) emitter.off(event, listener);
  };
}

/** One pipe that follows a single connection (a server, or the primary Sentinel names). */
function followServer(redis: Redis, lua: string, timeoutMs: number, clock: Clock): Pipes {
  const pipe = createScriptPipe(lua, timeoutMs, clock);
  const sentinel = redis.options.sentinels !== undefined && redis.options.sentinels !== null;
  const open = (): void => {
    // A Sentinel's primary is where ioredis's socket went; a server is where the config says.
    pipe.open(targetOf(redis, sentinel ? redis.stream.remoteAddress : undefined));
  };
  const stop = follow(redis, { ready: open, close: () => pipe.close() });
  if (redis.status === "ready") open();
  return {
    pipeFor: () => (pipe.ready ? pipe : undefined),
    close() {
      stop();
      pipe.close();
    },
  };
}

const nodeKey = (redis: Redis): string => `${redis.options.host}:${redis.options.port}`;

/**
 * A pipe per Cluster primary: opened for every primary when the slot map is learned (or on first
 * use), closed when the node leaves the Cluster.
 */
function followCluster(cluster: Cluster, lua: string, timeoutMs: number, clock: Clock): Pipes {
  const pipes = new Map<string, ScriptPipe>();
  const closeNode = (key: string): void => {
    pipes.get(key)?.close();
    pipes.delete(key);
  };
  const closeAll = (): void => {
    for (const key of [...pipes.keys()]) closeNode(key);
  };
  const pipeTo = (key: string): ScriptPipe | undefined => {
    let pipe = pipes.get(key);
    if (pipe === undefined) {
      const node = cluster.nodes("master").find((redis) => nodeKey(redis) === key);
      if (node === undefined) return undefined;
      pipe = createScriptPipe(lua, timeoutMs, clock);
      pipe.open(targetOf(node, undefined));
      pipes.set(key, pipe);
    }
    return pipe;
  };
  const openAll = (): void => {
    for (const node of cluster.nodes("master")) pipeTo(nodeKey(node));
  };
  const stop = follow(cluster, {
    ready: openAll,
    refresh: openAll,
    "-node": (node: Redis) => closeNode(nodeKey(node)),
    close: closeAll,
  });
  if (cluster.status === "ready") openAll();
  return {
    pipeFor(key) {
      const primary = cluster.slots[keySlot(key)]?.[0];
      const pipe = primary === undefined ? undefined : pipeTo(primary);
      return pipe?.ready ? pipe : undefined;
    },
    close() {
      stop();
      closeAll();
    },
  };
}

/**
 * A runner for `lua` on `connection`, which fails every call at once while the connection is not
 * callable; calls through its pipes fail after `timeoutMs` on `clock`.
 */
export function createScriptRunner(
  { client, callable, watched, failed: noted }: RedisConnection,
  lua: string,
  timeoutMs: number,
  clock: Clock,
): ScriptRunner {
  // The name ioredis knows the script by on the connection, one per script.
  const command = `gatehouse_${scriptSha(lua)}`;
  if (!(command in client)) client.defineCommand(command, { lua });
  const script = (client as unknown as ScriptClient)[command] as ScriptClient[string];
  const viaClient = (call: ScriptCall): Promise<Reply> =>
    watched(script.call(client, ...call.args()));
  const pipes =
    client instanceof Cluster
      ? followCluster(client, lua, timeoutMs, clock)
      : followServer(client, lua, timeoutMs, clock);
  return {
    run(call, answered, failed) {
      // While the health check finds Redis stalled or down, or since a call timed out, a call
      // fails at once (its request gets `on_outage`) instead of waiting on a connection that
      // may stay open but silent.
      if (!callable()) return Promise.reject(notCallable()).then(answered, failed);
      const pipe = pipes.pipeFor(call.key);
      if (pipe === undefined) return viaClient(call).then(answered, failed);
      return pipe.call(call).then(answered, (error: unknown) => {
        // Redis answered with an error, so the script did not run: ioredis may run it.
        if (error instanceof ReplyError) return viaClient(call).then(answered, failed);
        noted(error);
        return failed(error);
      });
    },
    close: () => pipes.close(),
  };
}
