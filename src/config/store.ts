/**
 * Holds what the running proxy uses (a snapshot and what is built from it) and swaps it whole on
 * reload, or changes nothing (envoyproxy/ratelimit `SetConfig`). Reloads come from SIGHUP and from
 * watching the config file's folder, which also sees a Kubernetes ConfigMap's `..data` symlink swap.
 */
import { realpathSync, watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import type { Logger } from "pino";
import type { Metrics } from "../metrics.js";
import { ConfigError } from "./load.js";
import { parseForReload } from "./parse-off-thread.js";
import { fileHash, loadSnapshot, type BuildOptions, type Snapshot } from "./snapshot.js";

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
  /** Re-reads the file; keeps the current runtime when the file is invalid. */
  reload(trigger: string): Promise<ReloadResult>;
  /** Starts watching the file's folder. */
  watch(): void;
  close(): void;
}

const DEBOUNCE_MS = 150;
const REARM_MS = 1000;

/** Creates the store around an already loaded runtime. */
export function createConfigStore<T extends { readonly config: Snapshot }>(
  options: ConfigStoreOptions<T>,
): ConfigStore<T> {
  const { log, metrics } = options;
  let current = options.initial;
  let running: Promise<ReloadResult> | undefined;
  let again = false;
  let debounce: NodeJS.Timeout | undefined;
  let rearm: NodeJS.Timeout | undefined;
  let closed = false;
  metrics.configHash.set({ hash: current.config.hash }, 1);

  async function reloadOnce(trigger: string): Promise<ReloadResult> {
    let config: Snapshot;
    try {
      config = await loadSnapshot(options.path, { ...options, parse: parseForReload });
    } catch (error) {
      metrics.configReloads.inc({ result: "failure" });
      const problems = error instanceof ConfigError ? error.message.split("\n") : [String(error)];
      log.error({ trigger, problems }, "config reload failed; the running config stays in force");
      return "failure";
    }
    if (config.identity === current.config.identity) {
      metrics.configReloads.inc({ result: "unchanged" });
      return "unchanged";
    }
    let next: T;
    try {
      next = await options.prepare(config, current);
    } catch (error) {
      metrics.configReloads.inc({ result: "failure" });
      log.error({ trigger, err: error }, "config reload failed; the running config stays in force");
      return "failure";
    }
    const previous = current;
    current = next;
    metrics.configHash.reset();
    metrics.configHash.set({ hash: config.hash }, 1);
    metrics.configReloads.inc({ result: "success" });
    options.onSwap?.(previous, next);
    log.info({ trigger, hash: config.hash }, "config reloaded");
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
      followLinks();
      if (again && !closed) {
        again = false;
        void reload(trigger);
      }
    });
    return running;
  }

  const file = resolve(options.path);
  let watchers: FSWatcher[] = [];
  let watched = "";

  // Editors and ConfigMaps fire several events per change: let them settle, then reload once.
  // A reload that finds the same bytes and keys counts as unchanged and swaps nothing.
  function scheduleReload(): void {
    clearTimeout(debounce);
    debounce = setTimeout(() => void reload("file change"), DEBOUNCE_MS);
    debounce.unref();
  }

  // The file's own folder, and the folder it resolves to when it is a symlink (edits made
  // through the link's target); a ConfigMap swap changes the target, so it is re-resolved.
  function folders(): string[] {
    let target = file;
    try {
      target = realpathSync(file);
    } catch {
      // Missing for a moment: watch the file's own folder until it is back.
    }
    return [...new Set([dirname(file), dirname(target)])];
  }

  function followLinks(): void {
    if (!closed && watchers.length > 0 && folders().join("\n") !== watched) {
      startWatching();
      void confirm();
    }
  }

  // A write between a reload's read and the watchers' re-arming on a new target (a ConfigMap
  // swap, then an edit) raises no event: once watching, compare what the file holds now.
  async function confirm(): Promise<void> {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch {
      return; // Missing for a moment: its return is an event in a watched folder.
    }
    if (!closed && fileHash(text) !== current.config.hash) scheduleReload();
  }

  function startWatching(): void {
    if (closed) return;
    closeWatchers();
    const wanted = folders();
    watched = wanted.join("\n");
    try {
      watchers = wanted.map((folder) => {
        const watcher = watch(folder, { persistent: false }, () => scheduleReload());
        watcher.on("error", () => restartWatching());
        return watcher;
      });
    } catch (error) {
      log.warn({ err: error, folders: wanted }, "cannot watch the config folder; retrying");
      restartWatching();
    }
  }

  function closeWatchers(): void {
    for (const watcher of watchers) watcher.close();
    watchers = [];
  }

  // A watched folder may be removed (IN_DELETE_SELF): watch again, then check for a change.
  function restartWatching(): void {
    closeWatchers();
    clearTimeout(rearm);
    rearm = setTimeout(() => {
      startWatching();
      scheduleReload();
    }, REARM_MS);
    rearm.unref();
  }

  return {
    get current() {
      return current;
    },
    reload,
    watch() {
      startWatching();
      void confirm();
    },
    close() {
      closed = true;
      closeWatchers();
      clearTimeout(debounce);
      clearTimeout(rearm);
    },
  };
}
