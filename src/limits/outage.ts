/**
 * What a count does when its store cannot be reached (Redis down, or slower than
 * `limits.redis.timeout`), as `limits.redis.on_outage` says; the plans' limits and the failure
 * limiter follow it alike. Under `local` the Redis store counts in its in-process fallback and
 * never fails, so only `open` and `closed` get here: `open` lets the request go on uncounted,
 * `closed` refuses it (503). The memory store cannot fail; a failure there is refused.
 */
import type { Metrics } from "../metrics.js";
import type { StoreSettings } from "./plans.js";

/** The `on_outage` in force: `local`, `open` or `closed`. */
export type OutagePolicy = "local" | "open" | "closed";

/** Decides about counts whose store failed. */
export interface Outage {
  readonly policy: OutagePolicy;
  /** Records a count that failed; true when the request goes on uncounted (`open`). */
  passes(): boolean;
}

/** The outage policy of `store`, counting failed counts in `metrics`. */
export function createOutage(store: StoreSettings, metrics: Metrics): Outage {
  const policy: OutagePolicy = store.kind === "redis" ? store.onOutage : "closed";
  return {
    policy,
    passes() {
      metrics.limiterStoreErrors.inc({ on_outage: policy });
      return policy !== "closed";
    },
  };
}
