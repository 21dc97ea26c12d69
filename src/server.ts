/**
 * Starts gatehouse: the composition root, wiring the first snapshot, the services, the limiter
 * stores and forwarders, the config store, the public and admin listeners and the shutdown, each
 * built in a module of its own. No module state: tests start several in one process.
 */
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { loadSnapshot, type Snapshot } from "./config/snapshot.js";
import type { ReloadResult } from "./config/store.js";
import { openLimiterStores } from "./limits/stores.js";
import { createEphemeralKeys } from "./tokens/keys.js";
import { createPlainSecrets } from "./tokens/secrets.js";
import { createLocalMarks } from "./tokens/marks.js";
import { createIssuerKeys } from "./tokens/issuer-keys.js";
import { listenOn } from "./http/listen.js";
import type { UpgradeTaker } from "./http/connections.js";
import { clientDeadlines, createPublicServer, type ClientTimeouts } from "./http/public-server.js";
import { createRequestIds } from "./http/request-ids.js";
import { createTraceIds, type TraceIds } from "./http/trace-context.js";
import { createSpanExports } from "./tracing/exporters.js";
import { createAdmin } from "./admin/server.js";
import { systemClock, type Clock } from "./clock.js";
import { createLogger } from "./log.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { createEntry, type Entry } from "./core/entry.js";
import type { Services } from "./core/services.js";
import { createForwarderPool } from "./upstream/forwarders.js";
import { createOpenConnections } from "./websocket/open-connections.js";
import { opensWebSocket } from "./websocket/upgrade.js";
import { createLifecycle, createShutdown } from "./lifecycle/drain.js";
import {
  openConfigStore,
  runtimeReady,
  type ConfigSource,
  type RuntimeParts,
} from "./lifecycle/runtime.js";
import { createUntrustedForwarded } from "./http/untrusted-forwarded.js";

export type { ClientTimeouts };

/** How to start gatehouse; everything but the config path has a default. */
export interface StartOptions {
  readonly configPath: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Overrides the logger (tests pass one writing to a buffer). */
  readonly log?: Logger;
  readonly now?: () => number;
  /** Overrides the monotonic clock and its timers (tests move time instead of waiting). */
  readonly clock?: Clock;
  readonly newId?: () => string;
  /** Overrides the random trace and span ids. */
  readonly traceIds?: TraceIds;
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
  /** Graceful shutdown (docs/operations.md): not ready, stop accepting after `delay`, drain up to `grace`. */
  shutdown(): Promise<void>;
}

/** Takes the WebSocket handshakes on the WebSocket routes of the config in force. */
function webSocketsOf(config: () => Snapshot, entry: Entry): UpgradeTaker {
  return (req, socket, head, room) => {
    if (!opensWebSocket(config().routes, req)) return false;
    entry.handleUpgrade(req, socket, head, room);
    return true;
  };
}

/** The public listener's server, its caps read from the config in force at each connection. */
function publicServer(config: () => Snapshot, entry: Entry, headersMs: number, services: Services) {
  return createPublicServer(entry.handle, {
    headersMs,
    maxConnections: () => config().file.max_connections,
    maxWebSockets: () => config().upstream.websocketMaxConnections,
    now: services.now,
    clock: services.clock,
    upgrade: webSocketsOf(config, entry),
  });
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
  // Under a Redis outage with `on_outage: closed` the replica takes no traffic.
  const lifecycle = createLifecycle(() => runtimeReady(store.current));
  const services: Services = {
    log,
    metrics,
    now: options.now ?? Date.now,
    clock: options.clock ?? systemClock,
    newId: options.newId ?? createRequestIds(),
    traceIds: options.traceIds ?? createTraceIds(),
    lifecycle,
  };

  const localMarks = createLocalMarks(services.now, services.clock);
  const websockets = createOpenConnections(services.now, services.clock);
  const parts: RuntimeParts = {
    services,
    forwarders: createForwarderPool(services),
    limiterStores: await openLimiterStores(services, first.limits, localMarks),
    spanExports: createSpanExports(metrics.traceSpansDropped, services.now),
    tokenBodyMs: deadlines.tokenBodyMs,
    localMarks,
    issuerKeys: createIssuerKeys(services),
    websockets,
    untrustedForwarded: createUntrustedForwarded(log, metrics.untrustedForwarded),
  };
  const store = await openConfigStore(first, source, parts);
  const entry = createEntry(
    () => store.current.stages,
    services,
    () => store.current.spans,
  );
  const server = publicServer(() => store.current.config, entry, deadlines.headersMs, services);
  const adminListen = options.adminListen ?? first.adminListen;
  const admin = createAdmin(services, () => store.current, adminListen.host);
  try {
    const file = source.path;
    await listenOn(server, { ...(options.listen ?? first.listen), key: "listen", file });
    await listenOn(admin, { ...adminListen, key: "admin_listen", file });
  } catch (error) {
    // Nothing is served: let go of what was opened, so the caller's process can end.
    server.close();
    parts.localMarks.close();
    parts.issuerKeys.close();
    await parts.limiterStores.release(undefined);
    await parts.spanExports.close();
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

  return {
    address: server.address() as AddressInfo,
    adminAddress: admin.address() as AddressInfo,
    log,
    metrics,
    config: () => store.current.config,
    reload: (trigger = "api") => store.reload(trigger),
    shutdown: createShutdown(lifecycle, { ...parts, store, requests: entry, server, admin }),
  };
}
