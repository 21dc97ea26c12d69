/**
 * Holds what the running proxy uses (a snapshot and what is built from it) and swaps it whole on
 * reload, or changes nothing (envoyproxy/ratelimit `SetConfig`). Reloads come from SIGHUP and from
 * watching the config file and the files it names (file-watch.ts).
 */
import { setImmediate as nextTurn } from "node:timers/promises";
import { resolve } from "node:path";
import type { Logger } from "pino";
import type { Metrics } from "../metrics.js";
import type { FileConfig } from "./schema.js";
import { keepBoundAddresses } from "./bound-addresses.js";
import { watchConfigFiles } from "./file-watch.js";
import { ConfigError } from "./load.js";
import { changedFiles, identityOf, type FileDigests, type FilesRead } from "./named-files.js";
import { createReloadFailures, type ReloadFailures } from "./reload-failures.js";
import { parseForReload } from "./parse-off-thread.js";
import { loadSnapshot, type BuildOptions, type Snapshot } from "./snapshot.js";

/** How a reload ended. */
export type ReloadResult = "success" | "failure" | "unchanged";

/** What the store needs to build and report; the build options are used for every reload. */
export interface ConfigStoreOptions<T extends { readonly config: Snapshot }> extends BuildOptions {
  readonly path: string;
  readonly env: NodeJS.ProcessEnv;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The first, already loaded runtime. */
  readonly initial: T;
  /** Builds the runtime for a new snapshot; may reuse parts of the previous one. */
  readonly prepare: (config: Snapshot, previous: T) => T | Promise<T>;
  /** Called after a swap with the runtime that was replaced. */
  readonly onSwap?: (previous: T, next: T) => void;
}

/** The runtime in force, swapped atomically. */
export interface ConfigStore<T> {
  readonly current: T;
  /** Re-reads the files; keeps the current runtime when one is invalid. */
  reload(trigger: string): Promise<ReloadResult>;
  /** Starts watching the files the config reads. */
  watch(): void;
  close(): void;
}

/** A snapshot and the runtime built for it, or why there is nothing to swap in and what was read. */
type Built<T> =
  | { readonly config: Snapshot; readonly next: T }
  | { readonly result: "failure" | "unchanged"; readonly read: FileDigests };

// Reads the files and builds their runtime; a failure or an unchanged reading is reported here.
async function build<T extends { readonly config: Snapshot }>(
  options: ConfigStoreOptions<T>,
  current: T,
  trigger: string,
  failures: ReloadFailures,
): Promise<Built<T>> {
  const read: FilesRead = new Map();
  let config: Snapshot;
  try {
    config = await loadSnapshot(options.path, { ...options, parse: parseForReload, read });
  } catch (error) {
    const problems = error instanceof ConfigError ? error.message.split("\n") : [String(error)];
    failures.failed(identityOf(read), trigger, { problems });
    return { result: "failure", read };
  }
  if (config.identity === current.config.identity) {
    failures.unchanged(trigger);
    return { result: "unchanged", read };
  }
  config = keepBoundAddresses(config, current.config, options.log);
  try {
    return { config, next: await options.prepare(config, current) };
  } catch (error) {
    failures.failed(config.identity, trigger, { err: error });
    return { result: "failure", read };
  }
}

/**
 * What was added, removed and changed among named entries, by name; empty lists left out. A list
 * holds at most NAMES_LOGGED names, and `counts` is there when one was cut: a reload that swaps
 * 10,000 routes logs a line an operator can read, not every path.
 */
interface NamedChanges {
  readonly added?: string[];
  readonly removed?: string[];
  readonly changed?: string[];
  readonly counts?: { readonly added: number; readonly removed: number; readonly changed: number };
}

const NAMES_LOGGED = 20;

/** What a reload changed, for its log line: names only, never a value (values hold secrets). */
interface ConfigChanges {
  /** The top-level keys whose value changed. */
  readonly sections: string[];
  readonly plans?: NamedChanges;
  /** A plan's limits (`plan.limit`; `plan.quota`), in the plans both configs have. */
  readonly limits?: NamedChanges;
  /** Routes by path (the routes of one path together). */
  readonly routes?: NamedChanges;
  readonly clients?: NamedChanges;
  /** The files the config names (keys, JWKS, CA) whose content changed. */
  readonly files?: string[];
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function named(
  before: ReadonlyMap<string, unknown>,
  after: ReadonlyMap<string, unknown>,
): NamedChanges | undefined {
  const added = [...after.keys()].filter((name) => !before.has(name));
  const removed = [...before.keys()].filter((name) => !after.has(name));
  const changed = [...after.keys()].filter(
    (name) => before.has(name) && !same(before.get(name), after.get(name)),
  );
  if (added.length + removed.length + changed.length === 0) return undefined;
  const cut = Math.max(added.length, removed.length, changed.length) > NAMES_LOGGED;
  const first = (names: string[]) => names.slice(0, NAMES_LOGGED);
  return {
    ...(added.length > 0 && { added: first(added) }),
    ...(removed.length > 0 && { removed: first(removed) }),
    ...(changed.length > 0 && { changed: first(changed) }),
    ...(cut && {
      counts: { added: added.length, removed: removed.length, changed: changed.length },
    }),
  };
}

function grouped<T>(items: readonly T[], name: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const group = groups.get(name(item));
    if (group === undefined) groups.set(name(item), [item]);
    else group.push(item);
  }
  return groups;
}

// A plan's limits by `plan.name`, the single rate_limit under its name in 429 bodies (default).
function planLimits(plans: FileConfig["plans"], names: readonly string[]): Map<string, unknown> {
  const limits = new Map<string, unknown>();
  for (const plan of names) {
    const { rate_limit: single, rate_limits: several, quota } = plans[plan] ?? {};
    if (single !== undefined) limits.set(`${plan}.default`, single);
    for (const [name, rule] of Object.entries(several ?? {})) limits.set(`${plan}.${name}`, rule);
    if (quota !== undefined) limits.set(`${plan}.quota`, quota);
  }
  return limits;
}

/** What changed from `before` to `after`, bounded: section, plan, limit, route and client names. */
async function configChanges(before: Snapshot, after: Snapshot): Promise<ConfigChanges> {
  const [a, b] = [before.file, after.file];
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof FileConfig>;
  const sections: string[] = [];
  // On a file of 10,000 routes each part below takes milliseconds: requests in flight run between.
  for (const key of keys) {
    if (!same(a[key], b[key])) sections.push(key);
    await nextTurn();
  }
  const kept = Object.keys(b.plans).filter((name) => name in a.plans);
  const plans = named(new Map(Object.entries(a.plans)), new Map(Object.entries(b.plans)));
  const limits = named(planLimits(a.plans, kept), planLimits(b.plans, kept));
  const routes = named(
    grouped(a.routes, (r) => r.path),
    grouped(b.routes, (r) => r.path),
  );
  await nextTurn();
  const clients = named(
    grouped(a.clients, (c) => c.id),
    grouped(b.clients, (c) => c.id),
  );
  const configFile = resolve(after.source);
  const files = changedFiles(before.files, after.files).filter((path) => path !== configFile);
  return {
    sections,
    ...(plans && { plans }),
    ...(limits && { limits }),
    ...(routes && { routes }),
    ...(clients && { clients }),
    ...(files.length > 0 && { files }),
  };
}

/** Creates the store around an already loaded runtime. */
export function createConfigStore<T extends { readonly config: Snapshot }>(
  options: ConfigStoreOptions<T>,
): ConfigStore<T> {
  const { log, metrics } = options;
  let current = options.initial;
  let running: Promise<ReloadResult> | undefined;
  let again = false;
  let closed = false;
  // The files to watch, with what the last reading found in them: the files in force, and those
  // a failed reading read, so that fixing one is seen too.
  let seen: FileDigests = current.config.files;
  const failures = createReloadFailures(log, metrics);
  metrics.configHash.set({ hash: current.config.hash }, 1);
  const fileWatch = watchConfigFiles(log, {
    reload: () => void reload("file change"),
    files: () => seen,
  });

  async function reloadOnce(trigger: string): Promise<ReloadResult> {
    const built = await build(options, current, trigger, failures);
    if (!("next" in built)) {
      seen = new Map([...current.config.files, ...built.read]);
      return built.result;
    }
    const { config, next } = built;
    // Worked out before the swap (reloads run one at a time), so that the line saying the config
    // was reloaded is written in the same turn as the swap.
    const changed = await configChanges(current.config, config);
    const previous = current;
    current = next;
    seen = config.files;
    metrics.configHash.reset();
    metrics.configHash.set({ hash: config.hash }, 1);
    metrics.configReloads.inc({ result: "success" });
    failures.applied();
    options.onSwap?.(previous, next);
    log.info({ trigger, hash: config.hash, changed }, "config reloaded");
    return "success";
  }

  // One reload at a time; a trigger during a reload runs one more afterwards.
  function reload(trigger: string): Promise<ReloadResult> {
    if (running !== undefined) {
      again = true;
      return running;
    }
    running = reloadOnce(trigger).finally(() => {
      running = undefined;
      fileWatch.follow();
      if (again && !closed) {
        again = false;
        void reload(trigger);
      }
    });
    return running;
  }

  return {
    get current() {
      return current;
    },
    reload,
    watch() {
      fileWatch.start();
    },
    close() {
      closed = true;
      fileWatch.close();
    },
  };
}
