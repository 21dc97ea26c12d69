/**
 * The limiter stores of a process, outliving reloads: one memory store, its counters (with the
 * process's token marks) restored from the state file at start and saved to it at shutdown, and
 * the Redis stores, whose client is
 * loaded with the first config that names Redis, never for the memory store. A plan that a reload
 * leaves alone keeps its counters, and a reload that changes only the prefix or outage policy
 * keeps the connection.
 */
import type { CounterStore } from "./counters.js";
import { createMemoryStore } from "./memory-store.js";
import type { LimitsSettings, StoreSettings } from "./plans.js";
import type { RedisStores, RedisStoresServices } from "./redis-stores.js";
import { restoreState, saveState, type MarksState } from "./state-file.js";
import type { Clock, Timer } from "../clock.js";

/** The registry of limiter stores. */
export interface LimiterStores {
  /** The store for `settings`: the memory store, or a Redis store once Redis's client is loaded. */
  storeFor(settings: StoreSettings): CounterStore | Promise<CounterStore>;
  /** Closes the Redis stores and connections that `inForce` does not use (none: every one). */
  release(inForce: StoreSettings | undefined): Promise<void>;
  /**
   * At shutdown: saves the memory store's counters and the marks to `stateFile`, if any; closes
   * every store.
   */
  close(stateFile: string | undefined): Promise<void>;
}

/**
 * Creates the registry for the limits in force at start, restoring the memory store's counters
 * and `marks` from their `stateFile`, if any.
 */
export async function openLimiterStores(
  services: RedisStoresServices,
  first: Pick<LimitsSettings, "store" | "stateFile">,
  marks: MarksState,
): Promise<LimiterStores> {
  const { log, now, clock } = services;
  const memoryStore = createMemoryStore({ now, clock });
  const { stateFile } = first;
  let saves: StateSaves | undefined;
  if (stateFile !== undefined) {
    await restoreState(memoryStore, marks, stateFile, now(), log);
    saves = stateSaves(() => saveState(memoryStore, marks, stateFile, now(), log), clock);
    marks.watch(saves.soon);
  } else if (first.store.kind === "memory") {
    // Redis keeps the marks for every replica; the memory store only in this process.
    log.info(
      "revoked tokens, used client assertions and used DPoP proofs are kept in this process only and forgotten at a restart; limits.state_file keeps them",
    );
  }
  let redisStores: Promise<RedisStores> | undefined;
  const loadRedisStores = (): Promise<RedisStores> =>
    (redisStores ??= import("./redis-stores.js").then((module) =>
      module.createRedisStores(services),
    ));
  const release = async (inForce: StoreSettings | undefined): Promise<void> => {
    if (redisStores === undefined) return;
    await (await redisStores).release(inForce?.kind === "redis" ? inForce : undefined);
  };
  return {
    storeFor(settings) {
      if (settings.kind === "memory") return memoryStore;
      return loadRedisStores().then((stores) => stores.storeFor(settings));
    },
    release,
    async close(stateFile) {
      await saves?.stop();
      if (stateFile !== undefined) await saveState(memoryStore, marks, stateFile, now(), log);
      await release(undefined);
      memoryStore.close();
    },
  };
}

/** Saves of the state file between start and shutdown. */
interface StateSaves {
  /** A mark was added: the file is saved within SAVE_AFTER_MS. */
  soon(): void;
  /** No save starts from now on; resolves once a save under way has finished. */
  stop(): Promise<void>;
}

/**
 * How soon a revocation or a used assertion id reaches the state file: a process killed after
 * that (kill -9, a node lost) still refuses the token, or the assertion, when it starts again.
 * Marks added meanwhile share the save.
 */
const SAVE_AFTER_MS = 500;

function stateSaves(save: () => Promise<void>, clock: Clock): StateSaves {
  let timer: Timer | undefined;
  // Marks were added since the last save began.
  let dirty = false;
  let saving = false;
  let stopped = false;
  let last: Promise<void> = Promise.resolve();
  // One save at a time; marks added during a save are saved by another right after it.
  const run = async (): Promise<void> => {
    timer = undefined;
    saving = true;
    while (dirty && !stopped) {
      dirty = false;
      await save();
    }
    saving = false;
  };
  return {
    soon() {
      dirty = true;
      if (stopped || saving || timer !== undefined) return;
      timer = clock.after(SAVE_AFTER_MS, () => {
        last = run();
      });
    },
    async stop() {
      stopped = true;
      timer?.cancel();
      await last;
    },
  };
}

/**
 * Whether the limits let the replica take traffic: not under a Redis outage with
 * `on_outage: closed`.
 */
export function limitsReady(settings: StoreSettings, store: CounterStore): boolean {
  return settings.kind === "memory" || settings.onOutage !== "closed" || store.healthy();
}
