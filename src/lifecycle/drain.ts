/**
 * Graceful shutdown (docs/operations.md): the replica says it is not ready at once, stops
 * accepting connections after `delay`, lets the requests in flight finish for up to `grace`, then
 * closes what is left and lets go of the forwarders and the limiter stores, saving the counters
 * to the state file.
 */
import type { Server } from "node:http";
import type { ConfigStore } from "../config/store.js";
import type { Entry } from "../core/entry.js";
import type { Lifecycle } from "../core/services.js";
import type { Runtime, RuntimeParts } from "./runtime.js";

/** The serving state, which the shutdown turns to draining. */
export interface DrainingLifecycle extends Lifecycle {
  startDraining(): void;
}

/** Ready while not draining and `ready()` holds. */
export function createLifecycle(ready: () => boolean): DrainingLifecycle {
  let draining = false;
  return {
    get draining() {
      return draining;
    },
    ready: () => !draining && ready(),
    startDraining() {
      draining = true;
    },
  };
}

/** What the shutdown stops, waits for and lets go of, besides the runtime parts. */
export interface ShutdownParts extends RuntimeParts {
  /** The config store: its `shutdown` settings are read when the shutdown starts. */
  readonly store: ConfigStore<Runtime>;
  readonly requests: Pick<Entry, "inFlight" | "idle">;
  readonly server: Server;
  readonly admin: Server;
}

/** The shutdown of a running gatehouse: the first call starts it, every call returns its end. */
export function createShutdown(
  lifecycle: DrainingLifecycle,
  parts: ShutdownParts,
): () => Promise<void> {
  let shutdown: Promise<void> | undefined;
  return () => (shutdown ??= drain(lifecycle, parts));
}

async function drain(lifecycle: DrainingLifecycle, parts: ShutdownParts): Promise<void> {
  const { store, requests, server, admin } = parts;
  const { log } = parts.services;
  const { delayMs, graceMs } = store.current.config.shutdown;
  lifecycle.startDraining();
  log.info({ delayMs, graceMs, inFlight: requests.inFlight() }, "draining");
  await sleep(delayMs);
  store.close();
  const closed = new Promise<void>((done) => server.close(() => done()));
  server.closeIdleConnections();
  if (await overTime(requests.idle(), graceMs)) {
    const inFlight = requests.inFlight();
    log.warn({ inFlight }, "grace period over; closing the remaining connections");
  }
  // RFC 6455 §7.4.1: 1001, going away; each side gets CLOSING_MS to finish its frame and close.
  parts.websockets.closeAll("the server is shutting down");
  server.closeAllConnections();
  await closed;
  await new Promise<void>((done) => admin.close(() => done()));
  admin.closeAllConnections();
  parts.forwarders.retireAll();
  // After the drain, so the requests that finished during it are counted in the file.
  await parts.limiterStores.close(store.current.config.limits.stateFile);
  // After the drain too, so the spans of the last requests are sent.
  await parts.spanExports.close();
  parts.localMarks.close();
  parts.issuerKeys.close();
  log.info("stopped");
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

// Whether `ms` passed before `settled` did. The timer is cleared either way: a drain that ends
// early must not keep the process alive for the rest of the grace period.
async function overTime(settled: Promise<void>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const over = new Promise<true>((done) => (timer = setTimeout(() => done(true), ms)));
  try {
    return await Promise.race([settled.then(() => false), over]);
  } finally {
    clearTimeout(timer);
  }
}
