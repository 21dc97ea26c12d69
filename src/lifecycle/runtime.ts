/**
 * What each config snapshot runs with: its stages, the forwarder for its upstream and the limiter
 * store for its limits, built at start and on every reload, and the config store that swaps it
 * whole and lets go of what the previous one used.
 */
import type { Stage } from "../core/context.js";
import type { Services } from "../core/services.js";
import type { Snapshot } from "../config/snapshot.js";
import { createConfigStore, type ConfigStore, type ConfigStoreOptions } from "../config/store.js";
import type { CounterStore } from "../limits/counters.js";
import { limitsReady, type LimiterStores } from "../limits/stores.js";
import { createWarnOnce } from "../log.js";
import { buildStages } from "../stages/index.js";
import type { OpenConnections } from "../websocket/open-connections.js";
import type { Forwarder } from "../upstream/forwarder.js";
import type { ForwarderPool } from "../upstream/forwarders.js";
import type { SpanExports } from "../tracing/exporters.js";
import type { SpanExport } from "../tracing/span-export.js";
import type { LocalMarks } from "../tokens/marks.js";
import type { IssuerKeys, IssuerKeySet } from "../tokens/issuer-keys.js";
import { acceptsClient } from "../tokens/verify.js";
import { tokenCachesFor, type TokenCaches } from "../tokens/caches.js";
import type { UntrustedForwarded } from "../http/untrusted-forwarded.js";

/** What one config snapshot runs with. */
export interface Runtime {
  readonly config: Snapshot;
  readonly stages: readonly Stage[];
  readonly forwarder: Forwarder;
  readonly limiterStore: CounterStore;
  /** Where its requests' spans go; undefined while tracing exports nothing. */
  readonly spans: SpanExport | undefined;
  /** Its verified tokens and remembered secrets: the previous runtime's while they still hold. */
  readonly caches: TokenCaches;
}

/** Where the config is read from, and what every snapshot is built with. */
export type ConfigSource = Pick<
  ConfigStoreOptions<Runtime>,
  "path" | "env" | "ephemeralKeys" | "plainSecrets"
>;

/** What the runtimes are built from, outliving reloads. */
export interface RuntimeParts {
  readonly services: Services;
  readonly forwarders: ForwarderPool;
  readonly limiterStores: LimiterStores;
  readonly spanExports: SpanExports;
  /** Milliseconds a token request's body may take to arrive (the slow-client deadline). */
  readonly tokenBodyMs: number;
  /** The process's used assertion ids and revoked token ids, kept across reloads. */
  readonly localMarks: LocalMarks;
  /** The trusted issuers' keys, kept across reloads that keep the issuer. */
  readonly issuerKeys: IssuerKeys;
  /** The open WebSocket connections, across reloads. */
  readonly websockets: OpenConnections;
  /** The peers warned about for forwarding headers they are not trusted to send, across reloads. */
  readonly untrustedForwarded: UntrustedForwarded;
}

/** The config store holding the runtime of `first`, building one for each reloaded snapshot. */
export async function openConfigStore(
  first: Snapshot,
  source: ConfigSource,
  {
    services,
    forwarders,
    limiterStores,
    spanExports,
    tokenBodyMs,
    localMarks,
    issuerKeys,
    websockets,
    untrustedForwarded,
  }: RuntimeParts,
): Promise<ConfigStore<Runtime>> {
  const { log, metrics } = services;
  const warn = createWarnOnce(log);
  const prepare = async (config: Snapshot, previous?: Runtime): Promise<Runtime> => {
    if (config.tokens.ephemeralKey) {
      warn(
        "no signing key configured (tokens.signing): tokens are signed with a key generated at start; they die with the process and are not shared between replicas",
      );
    }
    for (const { line, col, message } of config.warnings) warn(message, { line, col });
    const forwarder = forwarders.forwarderFor(config.upstream);
    const limiterStore = await limiterStores.storeFor(config.limits.store);
    const spans = await spanExports.recorderFor(config.tracing);
    // Started now, without waiting: a provider that is down must not hold the start or a reload.
    const keySets = new Map(
      config.tokens.trustedIssuers.map((issuer) => [issuer, issuerKeys.setFor(issuer)]),
    );
    // Kept by a reload that changes no key, issuer or client: clients behind an address over the
    // failure limit are then not refused because the configuration changed something else.
    const caches = tokenCachesFor(config.tokens, previous?.caches);
    return {
      config,
      forwarder,
      limiterStore,
      spans,
      caches,
      stages: buildStages(config, {
        services,
        forwarder,
        limiterStore,
        tokenBodyMs,
        localMarks,
        keySetFor: (issuer) => keySets.get(issuer) as IssuerKeySet,
        websockets,
        caches,
        untrustedForwarded,
      }),
    };
  };
  return createConfigStore<Runtime>({
    ...source,
    log,
    metrics,
    initial: await prepare(first),
    prepare,
    onSwap(previous, next) {
      forwarders.replace(previous.forwarder, next.forwarder);
      void limiterStores.release(next.config.limits.store);
      spanExports.replace(previous.spans, next.spans);
      issuerKeys.retain(next.config.tokens.trustedIssuers);
      log.level = next.config.file.logging.level;
      const { tokens } = next.config;
      websockets.acceptOnly((issuer, clientId) => acceptsClient(tokens, issuer, clientId));
    },
  });
}

/** Whether `runtime` lets the replica take traffic (its limiter store may forbid it). */
export function runtimeReady({ config, limiterStore }: Runtime): boolean {
  return limitsReady(config.limits.store, limiterStore);
}
