/**
 * Watches the config file for the store: its folder, and the folder it resolves to when it is a
 * symlink, which also sees a Kubernetes ConfigMap's `..data` symlink swap. A burst of events
 * settles into one reload; a removed folder is watched again.
 */
import { readFileSync, realpathSync, watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { fileHash } from "./snapshot.js";

const DEBOUNCE_MS = 150;
const REARM_MS = 1000;

/** What the watch asks of the store. */
export interface FileWatchHooks {
  /** Reloads the file, once its events have settled. */
  readonly reload: () => void;
  /** The hash of the file that the running snapshot was built from. */
  readonly currentHash: () => string;
}

/** The watch of one config file. */
export interface FileWatch {
  /** Starts watching, then compares the file with the running snapshot. */
  start(): void;
  /** After a reload: watches again when the file now resolves to another folder. */
  follow(): void;
  /** Stops watching for good. */
  close(): void;
}

// The file's text now, or undefined while it is missing for a moment (its return is an event in a
// watched folder).
function readNow(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/** Creates the watch of `file` (an absolute path); nothing is watched until `start`. */
export function watchConfigFile(file: string, log: Logger, hooks: FileWatchHooks): FileWatch {
  let watchers: FSWatcher[] = [];
  let watched = "";
  let debounce: NodeJS.Timeout | undefined;
  let rearm: NodeJS.Timeout | undefined;
  let closed = false;

  // Editors and ConfigMaps fire several events per change: let them settle, then reload once.
  // A reload that finds the same bytes and keys counts as unchanged and swaps nothing.
  function scheduleReload(): void {
    clearTimeout(debounce);
    debounce = setTimeout(() => hooks.reload(), DEBOUNCE_MS);
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

  // A write between a read of the file and the watchers' arming (the first load, or a ConfigMap
  // swap then an edit) raises no event: once watching, compare what the file holds now.
  function compare(text: string): void {
    if (!closed && fileHash(text) !== hooks.currentHash()) scheduleReload();
  }

  async function confirm(): Promise<void> {
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch {
      return; // Missing for a moment: its return is an event in a watched folder.
    }
    compare(text);
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
    start() {
      startWatching();
      // Once, at start, before gatehouse says it listens: whoever waits for that line and then
      // writes the file knows the write is a change that the watch or a SIGHUP will apply.
      const text = readNow(file);
      if (text !== undefined) compare(text);
    },
    follow() {
      if (!closed && watchers.length > 0 && folders().join("\n") !== watched) {
        startWatching();
        void confirm();
      }
    },
    close() {
      closed = true;
      closeWatchers();
      clearTimeout(debounce);
      clearTimeout(rearm);
    },
  };
}
