/**
 * The connection to Redis shared by every Redis store with the same connection settings: one
 * server, a Cluster or the primary that Sentinel names, connected in the background, bounded per
 * command, and watched by a health check so readiness follows Redis.
 */
import { Cluster, Redis, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import type { Metrics } from "../metrics.js";
import type { RedisSettings } from "./plans.js";
import { guardedConnector } from "./redis-sockets.js";
import { PipeTimeout } from "./script-pipe.js";
import { systemClock, type Clock } from "../clock.js";

/** How often Redis is asked whether it answers, so readiness follows it within 2 s. */
const HEALTH_INTERVAL_MS = 500;
/** This long without an answer to a health check means Redis is stalled. */
const HEALTH_DEADLINE_MS = 1000;
/** How often a Cluster client asks for the slot map anyway. */
const SLOTS_REFRESH_MS = 5000;
/** The longest wait between two reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 1000;

/** One connection to one Redis deployment, shared by every store with its connection settings. */
export interface RedisConnection {
  readonly client: Redis | Cluster;
  /** Whether Redis is connected and answered its last health check in time (readiness). */
  healthy(): boolean;
  /**
   * Whether a call may be sent now: healthy, and no call has timed out since Redis last answered
   * a health check. A request whose first call timed out then pays no second timeout for its next
   * call, and neither do the requests arriving during the stall before the health check sees it.
   */
  callable(): boolean;
  /** Passes on `call`'s outcome, noting a timeout, which stops calls until Redis answers again. */
  watched<T>(call: Promise<T>): Promise<T>;
  /** Notes why a call failed, as `watched` does. */
  failed(error: unknown): void;
  /** The `on_outage` of the config in force, which the outage line names; a reload may change it. */
  outagePolicy(policy: RedisSettings["onOutage"]): void;
  /** Stops the health checks and closes the connection; nothing is reported after. */
  close(): Promise<void>;
}

/** What a Redis connection reports to. */
export interface RedisServices {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The health check's timer and the time since Redis last answered (default the process's). */
  readonly clock?: Clock;
}

// No queue while disconnected and every command bounded, so an outage costs a request at most
// `timeout`, never a pile of waiting commands; a command that timed out or was cut off by a
// reconnection is not sent again later (its request was answered already).
function nodeOptions(settings: RedisSettings): RedisOptions {
  const { tls } = settings;
  return {
    commandTimeout: settings.timeoutMs,
    autoResendUnfulfilledCommands: false,
    // Scripts that go through ioredis (while the script connection is not ready, or after an
    // error answer) are written together too, as on the script connection itself.
    enableAutoPipelining: true,
    connectTimeout: Math.max(settings.timeoutMs, HEALTH_DEADLINE_MS),
    // A socket fault after ioredis reported one must not end the process (see redis-sockets.ts).
    Connector: guardedConnector(settings.topology.kind === "sentinel"),
    ...(settings.username === undefined ? {} : { username: settings.username }),
    ...(settings.password === undefined ? {} : { password: settings.password }),
    ...(tls === undefined
      ? {}
      : { tls: { ca: tls.ca, ...(tls.servername ? { servername: tls.servername } : {}) } }),
  };
}

// A call that reached Redis and got no answer within `timeout`: ioredis's commandTimeout, or a
// script pipe's own.
function isTimeout(error: unknown): boolean {
  return error instanceof PipeTimeout || (error as Error).message === "Command timed out";
}

/** Why a call was not sent: the connection is not callable. */
export function notCallable(): Error {
  return new Error("Redis does not answer: its health check failed, or a call timed out");
}

const reconnectDelay = (attempt: number): number => Math.min(attempt * 100, MAX_RECONNECT_DELAY_MS);

/**
 * Connects ioredis to every primary as soon as the slot map names it. ioredis connects to a node
 * on its first command and queues commands until then; the scripts usually travel through
 * gatehouse's own connections, so that first command could come while the node is down and wait
 * in the queue until it is back, counting long after its request was answered.
 */
function keepPrimariesConnected(cluster: Cluster): void {
  const connectAll = (): void => {
    if (cluster.status !== "ready") return;
    for (const node of cluster.nodes("master")) {
      if (node.status === "wait") node.connect().catch(() => undefined);
    }
  };
  cluster.on("ready", connectAll);
  cluster.on("refresh", connectAll);
}

/** The ioredis client for the topology of `settings`; it connects in the background. */
function createClient(settings: RedisSettings): Redis | Cluster {
  const node = nodeOptions(settings);
  const where = settings.topology;
  if (where.kind === "cluster") {
    const cluster = new Cluster([...where.nodes], {
      enableOfflineQueue: false,
      redisOptions: node,
      clusterRetryStrategy: reconnectDelay,
      // A restarted node is found again through the slots refresh and MOVED answers; a node
      // connection of its own also comes back by itself.
      clusterNodeRetryStrategy: reconnectDelay,
      slotsRefreshTimeout: node.connectTimeout as number,
      // A replica promoted by the Cluster, or a node added, is learned without waiting for an
      // error to reveal it.
      slotsRefreshInterval: SLOTS_REFRESH_MS,
      // A command refused because its node is down or the Cluster is failing over is not tried
      // again later: its request was answered (on_outage) by then, so it must not count after.
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
    });
    keepPrimariesConnected(cluster);
    return cluster;
  }
  const common = { ...node, enableOfflineQueue: false, retryStrategy: reconnectDelay };
  if (where.kind === "server") return new Redis(where.url, common);
  return new Redis({
    ...common,
    sentinels: [...where.nodes],
    name: where.masterName,
    ...(where.password === undefined ? {} : { sentinelPassword: where.password }),
    // TLS, when on, is on for the Sentinels too.
    ...(node.tls === undefined ? {} : { enableTLSForSentinelMode: true, sentinelTLS: node.tls }),
    sentinelCommandTimeout: node.connectTimeout as number,
    sentinelRetryStrategy: reconnectDelay,
    // A closed connection asks the Sentinels for the primary again, and a server found not to be
    // the primary is left. A former primary that came back as a replica answers writes with
    // READONLY: that too sends the connection back to the Sentinels.
    reconnectOnError: (error) => error.message.startsWith("READONLY"),
  });
}

// Whether one health probe found Redis able to count: a PING answered, or on a Cluster the
// cluster state being ok (a Cluster missing a primary refuses every command).
async function probe(client: Redis | Cluster): Promise<boolean> {
  if (client instanceof Cluster) {
    const info = String(await client.call("CLUSTER", "INFO"));
    return info.includes("cluster_state:ok");
  }
  await client.ping();
  return true;
}

/**
 * The error as logs may show it: ioredis attaches the failed command to its errors, and the
 * command of a failed authentication (AUTH, HELLO) carries the password.
 */
function withoutCommand(error: unknown): Record<string, string | undefined> | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, syscall } = error as NodeJS.ErrnoException;
  return { type: error.name, message: error.message, code, syscall };
}

// What gatehouse does while Redis is down, in the words of each `on_outage`.
const DURING_OUTAGE: Record<RedisSettings["onOutage"], string> = {
  local: "counting in this process until Redis answers",
  open: "allowing requests without limits until Redis answers",
  closed: "answering 503 limits_unavailable and not ready until Redis answers",
};

/** Calls `lost` on every sign that the connection is lost. */
function onLoss(client: Redis | Cluster, lost: (error: Error) => void): void {
  // ioredis reports every failed connection attempt as an error event.
  client.on("error", lost);
  if (client instanceof Cluster) client.on("node error", lost);
  client.on("close", () => lost(new Error("the connection to Redis closed")));
}

/**
 * Since a call timed out, and until Redis answers a health check (asked for at once through
 * `askNow`), calls are not sent: they fail at once, without dropping the connection or changing
 * readiness, so a stall costs a request one timeout, not one per call.
 */
function timeoutGate(askNow: () => void) {
  let timedOut = false;
  const gate = {
    open: (): boolean => !timedOut,
    answered(): void {
      timedOut = false;
    },
    failed(error: unknown): void {
      if (isTimeout(error)) {
        timedOut = true;
        askNow();
      }
    },
    watched<T>(call: Promise<T>): Promise<T> {
      return call.catch((error: unknown) => {
        gate.failed(error);
        throw error;
      });
    },
  };
  return gate;
}

/**
 * Connects to Redis in the background: an unreachable Redis is an outage, not a start error, and
 * the connection comes back by itself.
 */
export function connectRedis(settings: RedisSettings, services: RedisServices): RedisConnection {
  const { log, metrics } = services;
  const clock = services.clock ?? systemClock;
  const client = createClient(settings);
  // Undefined until the first verdict, so that a Redis unreachable from the start is reported.
  let answering: boolean | undefined;
  // Only a connection that answered before can come back: the first answer is not a recovery.
  let answered = false;
  let onOutage = settings.onOutage;
  let closed = false;
  metrics.limiterStoreUp.set(0);
  const markAnswering = (now: boolean, error?: unknown): void => {
    if (closed || now === answering) return;
    answering = now;
    metrics.limiterStoreUp.set(now ? 1 : 0);
    if (now) {
      log.info(
        { redis: settings.display },
        answered
          ? "redis answers again; limits are shared again"
          : "redis connected; limits are shared",
      );
      answered = true;
      return;
    }
    log.warn(
      { redis: settings.display, onOutage, err: withoutCommand(error) },
      `redis does not answer; on_outage is ${onOutage}: ${DURING_OUTAGE[onOutage]}`,
    );
  };
  onLoss(client, (error) => markAnswering(false, error));
  // A PING slower than `timeout` fails like any command, but only a second without any answer
  // counts as a stall: one slow moment does not drop the connection.
  let lastAnswer = 0;
  let checking = false;
  const gate = timeoutGate(() => check());
  const check = (): void => {
    if (client.status !== "ready") return;
    if (clock.monotonic() - lastAnswer > HEALTH_DEADLINE_MS) {
      markAnswering(false, new Error(`no answer to PING for ${HEALTH_DEADLINE_MS} ms`));
      // Connected but silent (a stalled Redis keeps its socket open): drop the connection, so
      // commands fail at once while it lasts instead of each waiting for the timeout.
      client.disconnect(true);
      return;
    }
    if (checking) return;
    checking = true;
    probe(client)
      .then(
        (able) => {
          lastAnswer = clock.monotonic();
          if (able) gate.answered();
          markAnswering(able, able ? undefined : new Error("the cluster state is not ok"));
        },
        () => undefined,
      )
      .finally(() => {
        checking = false;
      });
  };
  client.on("ready", () => {
    lastAnswer = clock.monotonic();
    check();
  });
  const health = clock.every(HEALTH_INTERVAL_MS, check);
  const healthy = (): boolean => answering === true && client.status === "ready";
  return {
    client,
    healthy,
    callable: () => gate.open() && healthy(),
    watched: gate.watched,
    failed: gate.failed,
    outagePolicy(policy) {
      onOutage = policy;
    },
    async close() {
      closed = true;
      health.cancel();
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
