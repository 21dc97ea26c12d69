/**
 * Starts gatehouse: the public listener running the pipeline, the admin listener serving /metrics,
 * config reloads and graceful shutdown. No module state: tests start several in one process.
 */
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { loadSnapshot, type Snapshot } from "./config/snapshot.js";
import type { ReloadResult } from "./config/store.js";
import { openLimiterStores } from "./limits/stores.js";
import { createEphemeralKeys } from "./tokens/keys.js";
import { createPlainSecrets } from "./tokens/secrets.js";
import { listenOn } from "./http/listen.js";
import { clientDeadlines, createPublicServer, type ClientTimeouts } from "./http/public-server.js";
import { createRequestIds } from "./http/request-ids.js";
import { createAdmin } from "./admin/server.js";
import { createLogger } from "./log.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { createEntry } from "./core/entry.js";
import type { Lifecycle, Services } from "./core/services.js";
import { createForwarderPool } from "./upstream/pool.js";
import { openConfigStore, runtimeReady, type ConfigSource } from "./lifecycle/runtime.js";

export type { ClientTimeouts };

/** How to start gatehouse; everything but the config path has a default. */
export interface StartOptions {
  readonly configPath: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Overrides the logger (tests pass one writing to a buffer). */
  readonly log?: Logger;
  readonly now?: () => number;
  readonly newId?: () => string;
  /** Overrides `listen` and `admin_listen` (tests use port 0). */
  readonly listen?: { readonly host: string; readonly port: number };
  readonly adminListen?: { readonly host: string; readonly port: number };
  /** Watch the config file for changes (default true). */
  readonly watch?: boolean;
  /** Overrides the slow-client deadlines (tests use short ones). */
  readonly clientTimeouts?: ClientTimeouts;
}

/** A running gatehouse. */
export interface Gatehouse {
  readonly address: AddressInfo;
  readonly adminAddress: AddressInfo;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The snapshot in force. */
  config(): Snapshot;
  reload(trigger?: string): Promise<ReloadResult>;
  /** Graceful shutdown (README, Operations): not ready, stop accepting after `delay`, drain up to `grace`. */
  shutdown(): Promise<void>;
}

/** Loads the config (throwing ConfigError if invalid) and starts serving. */
export async function startGatehouse(options: StartOptions): Promise<Gatehouse> {
  const source: ConfigSource = {
    path: options.configPath,
    env: options.env ?? process.env,
    // Generated once: a reload must not invalidate the tokens signed with a generated key.
    ephemeralKeys: createEphemeralKeys(),
    plainSecrets: createPlainSecrets(),
  };
  const first = await loadSnapshot(source.path, source);
  const log = options.log ?? createLogger(first.file.logging.level);
  const metrics = createMetrics();
  const deadlines = clientDeadlines(options.clientTimeouts);
  let draining = false;
  const lifecycle: Lifecycle = {
    get draining() {
      return draining;
    },
    // Under a Redis outage with `on_outage: closed` the replica takes no traffic.
    ready: () => !draining && runtimeReady(store.current),
  };
  const services: Services = {
    log,
    metrics,
    now: options.now ?? Date.now,
    newId: options.newId ?? createRequestIds(),
    lifecycle,
    tokenBodyMs: deadlines.tokenBodyMs,
  };

  const limiterStores = await openLimiterStores(services, first.limits.stateFile);

  const forwarders = createForwarderPool(services);
  const store = await openConfigStore(first, source, { services, forwarders, limiterStores });
  const entry = createEntry(() => store.current.stages, services);

  const server = createPublicServer(entry.handle, {
    headersMs: deadlines.headersMs,
    maxConnections: () => store.current.config.file.max_connections,
    now: services.now,
  });

  const adminListen = options.adminListen ?? first.adminListen;
  const admin = createAdmin(services, () => store.current, adminListen.host);

  try {
    await listenOn(server, options.listen ?? first.listen);
    await listenOn(admin, adminListen);
  } catch (error) {
    // Nothing is served: let go of what was opened, so the caller's process can end.
    server.close();
    await limiterStores.release(undefined);
    throw error;
  }
  if (options.watch !== false) store.watch();
  log.info(
    {
      listen: server.address(),
      admin: admin.address(),
      upstream: first.upstream.url.href,
      hash: first.hash,
    },
    "gatehouse listening",
  );
  // Whoever started the process waits for this line; it does not wait for the buffer to fill.
  log.flush();

  let shutdownPromise: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    shutdownPromise ??= (async () => {
      const { delayMs, graceMs } = store.current.config.shutdown;
      draining = true;
      log.info({ delayMs, graceMs, inFlight: entry.inFlight() }, "draining");
      await sleep(delayMs);
      store.close();
      const closed = new Promise<void>((done) => server.close(() => done()));
      server.closeIdleConnections();
      const finished = entry.idle();
      const graceOver = await Promise.race([
        finished.then(() => false),
        sleep(graceMs).then(() => true),
      ]);
      if (graceOver)
        log.warn(
          { inFlight: entry.inFlight() },
          "grace period over; closing the remaining connections",
        );
      server.closeAllConnections();
      await closed;
      await new Promise<void>((done) => admin.close(() => done()));
      admin.closeAllConnections();
      forwarders.retireAll();
      // After the drain, so the requests that finished during it are counted in the file.
      await limiterStores.close(store.current.config.limits.stateFile);
      log.info("stopped");
    })();
    return shutdownPromise;
  };

  return {
    address: server.address() as AddressInfo,
    adminAddress: admin.address() as AddressInfo,
    log,
    metrics,
    config: () => store.current.config,
    reload: (trigger = "api") => store.reload(trigger),
    shutdown,
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}
