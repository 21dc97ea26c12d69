/**
 * The forwarders of a process, one per upstream identity (`forwarderKey`): a reload that keeps the
 * upstream keeps its forwarder and its pooled sockets; a forwarder the config in force no longer
 * uses is retired.
 */
import type { Services } from "../core/services.js";
import { createForwarder, forwarderKey, type Forwarder } from "./forwarder.js";
import type { UpstreamSettings } from "./settings.js";

/** The forwarders in use, by key. */
export interface ForwarderPool {
  /** The forwarder for `upstream`, created when none has its key yet. */
  forwarderFor(upstream: UpstreamSettings): Forwarder;
  /** After a reload: retires `previous` unless `next` is the same forwarder. */
  replace(previous: Forwarder, next: Forwarder): void;
  /** At shutdown: retires every forwarder. */
  retireAll(): void;
}

/** Creates an empty pool whose forwarders use `services`. */
export function createForwarderPool(services: Services): ForwarderPool {
  const forwarders = new Map<string, Forwarder>();
  return {
    forwarderFor(upstream) {
      const key = forwarderKey(upstream);
      let forwarder = forwarders.get(key);
      if (forwarder === undefined) {
        forwarder = createForwarder(upstream, services);
        forwarders.set(key, forwarder);
      }
      return forwarder;
    },
    replace(previous, next) {
      if (previous === next) return;
      forwarders.delete(previous.key);
      previous.retire();
    },
    retireAll() {
      for (const forwarder of forwarders.values()) forwarder.retire();
    },
  };
}
