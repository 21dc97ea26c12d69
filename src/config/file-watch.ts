/**
 * Watches the files a configuration reads for the store: the config file and the key, JWKS and
 * CA files it names. Each is watched through its folder, and through the folder it resolves to
 * when it is a symlink, which also sees a Kubernetes ConfigMap's `..data` symlink swap. Only an
 * event naming one of those files (or a link on the way to one) starts a reload: a log written
 * beside the config does not. A burst of events settles into one reload; a removed folder is
 * watched again.
 */
import { lstatSync, readlinkSync, realpathSync, watch, type FSWatcher } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import type { Logger } from "pino";
import { digestNow, type FileDigests } from "./named-files.js";

const DEBOUNCE_MS = 150;
const REARM_MS = 1000;
// As the kernel's own limit on a path's symlinks (Linux MAXSYMLINKS): a loop ends here.
const MAX_LINKS = 40;

/** What the watch asks of the store. */
export interface FileWatchHooks {
  /** Reloads the configuration, once its events have settled. */
  readonly reload: () => void;
  /** The files to watch, each with the digest the last reading found. */
  readonly files: () => FileDigests;
}

/** The watch of the files one configuration reads. */
export interface FileWatch {
  /** Starts watching, then compares the files with the last reading. */
  start(): void;
  /** After a reload: watches again when the files, or the folders they resolve to, changed. */
  follow(): void;
  /** Stops watching for good. */
  close(): void;
}

/** Folder -> the names in it whose events concern a watched file. */
type WatchPoints = Map<string, Set<string>>;

function linkTarget(path: string): string | undefined {
  try {
    return readlinkSync(path);
  } catch {
    return undefined; // Not a link, or missing for a moment.
  }
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

function realFolder(folder: string): string {
  try {
    return realpathSync(folder);
  } catch {
    return folder; // Missing for a moment: watched by its name until it is back.
  }
}

/**
 * Where events about `files` appear: each file's name in its folder, and along its chain of
 * symlinks every link's name in its folder, including a symlinked folder such as a ConfigMap's
 * `..data`, which an update renames a new link over.
 */
export function watchPoints(files: Iterable<string>): WatchPoints {
  const points: WatchPoints = new Map();
  const add = (path: string): void => {
    const folder = realFolder(dirname(path));
    const names = points.get(folder) ?? new Set<string>();
    names.add(basename(path));
    points.set(folder, names);
  };
  for (const file of files) {
    let path = file;
    for (let hop = 0; hop < MAX_LINKS; hop++) {
      add(path);
      if (isLink(dirname(path))) add(dirname(path));
      const target = linkTarget(path);
      if (target === undefined) break;
      path = resolve(dirname(path), target);
    }
  }
  return points;
}

function describe(points: WatchPoints): string {
  return [...points]
    .map(([folder, names]) => `${folder}\0${[...names].sort().join("\0")}`)
    .sort()
    .join("\n");
}

/**
 * Watchers of `points` calling `changed` for each event about a watched name, and `failed` when
 * one stops; the folders that do not exist are left out and listed.
 */
function arm(
  points: WatchPoints,
  changed: () => void,
  failed: () => void,
): { watchers: FSWatcher[]; missing: string[] } {
  const watchers: FSWatcher[] = [];
  const missing: string[] = [];
  try {
    for (const [folder, names] of points) {
      try {
        // Without a name (some platforms give none) the event cannot be told apart: reload.
        const watcher = watch(folder, { persistent: false }, (_event, name) => {
          if (name === null || names.has(name.toString())) changed();
        });
        watcher.on("error", failed);
        watchers.push(watcher);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
        missing.push(folder);
      }
    }
  } catch (error) {
    for (const watcher of watchers) watcher.close();
    throw error;
  }
  return { watchers, missing };
}

/** Creates the watch of the files `hooks.files()` names; nothing is watched until `start`. */
export function watchConfigFiles(log: Logger, hooks: FileWatchHooks): FileWatch {
  let watchers: FSWatcher[] = [];
  let watched = "";
  let debounce: NodeJS.Timeout | undefined;
  let rearm: NodeJS.Timeout | undefined;
  let closed = false;
  let started = false;
  // Whether a folder was missing at the last arming (armed again after each reload until it is
  // there), and the set of folders last warned about, so that the warning is said once.
  let incomplete = false;
  let warned = "";

  // Editors and ConfigMaps fire several events per change: let them settle, then reload once.
  // A reload that finds the same bytes and keys counts as unchanged and swaps nothing.
  function scheduleReload(): void {
    clearTimeout(debounce);
    debounce = setTimeout(() => hooks.reload(), DEBOUNCE_MS);
    debounce.unref();
  }

  // A write between a reading of the files and the watchers' arming (the first load, or a
  // ConfigMap swap then an edit) raises no event: once watching, compare what the files hold now.
  async function confirm(): Promise<void> {
    const files = hooks.files();
    for (const [path, digest] of files) {
      if (closed) return;
      if ((await digestNow(path)) !== digest) {
        scheduleReload();
        return;
      }
    }
  }

  // A folder that does not exist (a key file's, named by mistake) is left out, once said: the
  // files in it cannot be read, so the config is refused until it is there and SIGHUP applies it.
  function startWatching(points: WatchPoints): void {
    if (closed) return;
    closeWatchers();
    watched = describe(points);
    let missing: string[];
    try {
      ({ watchers, missing } = arm(points, scheduleReload, restartWatching));
    } catch (error) {
      const folders = [...points.keys()];
      log.warn({ err: error, folders }, "cannot watch a config folder; retrying");
      restartWatching();
      return;
    }
    incomplete = missing.length > 0;
    if (incomplete && warned !== watched) {
      log.warn(
        { folders: missing },
        "a folder of a file the config reads is missing and is not watched; SIGHUP reloads",
      );
    }
    warned = incomplete ? watched : "";
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
      startWatching(watchPoints(hooks.files().keys()));
      void confirm();
    }, REARM_MS);
    rearm.unref();
  }

  return {
    start() {
      started = true;
      // Armed before gatehouse says it listens: whoever waits for that line and then writes a
      // file knows the write is a change that the watch or a SIGHUP will apply.
      startWatching(watchPoints(hooks.files().keys()));
      void confirm();
    },
    follow() {
      if (closed || !started) return;
      const points = watchPoints(hooks.files().keys());
      if (describe(points) === watched && !incomplete) return;
      startWatching(points);
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
