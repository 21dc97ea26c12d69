/**
 * Reading the files the configuration names, and the configuration itself, as nginx and Envoy
 * do: only a regular file of a bounded size is read. Each is opened without waiting (a FIFO would
 * otherwise hold the open until a writer came) and looked at before a byte is read, so a FIFO, a
 * device or a folder put at a configured path is a refused file, never a stopped process.
 *
 * A regular file can still keep a read waiting: on a file system that does not answer (an NFS
 * server gone with a hard mount, a stuck FUSE daemon) the open or the read waits in the kernel,
 * and every read waits while libuv's few threads (4 by default) are all taken. A reading of the
 * configuration gives such a read READ_WAIT_MS, then goes on without it.
 */
import { constants, type Stats } from "node:fs";
import { open } from "node:fs/promises";
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";

/** The most a key file or a JWKS may hold. */
export const KEY_FILE_CAP = 1024 * 1024;
/** The most the configuration file may hold. */
export const CONFIG_CAP = 16 * 1024 * 1024;

/** A path that holds something other than a regular file of a size gatehouse reads. */
export class UnfitFile extends Error {
  constructor(
    /** ENOTREG or EFBIG. */
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const NOT_WAITING = constants.O_RDONLY | constants.O_NONBLOCK;

function kindOf(stats: Stats): string {
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isDirectory()) return "a folder";
  if (stats.isSocket()) return "a socket";
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return "a device";
  return "not a regular file";
}

function mib(bytes: number): string {
  return `${bytes / 1024 / 1024} MiB`;
}

function check(stats: Stats, cap: number): void {
  if (!stats.isFile()) throw new UnfitFile("ENOTREG", `${kindOf(stats)}, not a regular file`);
  if (stats.size > cap) {
    throw new UnfitFile("EFBIG", `${stats.size} bytes, over the ${mib(cap)} a file may hold`);
  }
}

/** The longest a reading of the configuration waits for one file. */
export const READ_WAIT_MS = 5000;

/** A read that got no answer within READ_WAIT_MS. */
export class UnansweredRead extends Error {
  readonly code = "ETIMEDOUT";
  constructor() {
    super(`no answer from its file system within ${READ_WAIT_MS / 1000} s`);
  }
}

/** Why a read of a file failed, for a message: what is there instead, or the system's code. */
export function unreadableReason(error: unknown): string {
  if (error instanceof UnfitFile || error instanceof UnansweredRead) return error.message;
  return (error as NodeJS.ErrnoException).code ?? String(error);
}

/** The text of `path` when it is a regular file of at most `cap` bytes; else throws UnfitFile. */
export async function readRegularFile(path: string, cap = Infinity): Promise<string> {
  const handle = await open(path, NOT_WAITING);
  try {
    check(await handle.stat(), cap);
    return await handle.readFile("utf8");
  } finally {
    await handle.close();
  }
}

// The latest read of each file (by path and cap) that has not answered yet, and when it began. A
// read cannot be called off once its thread waits in the kernel: while one has gone unanswered
// for READ_WAIT_MS, a new read of that file fails at once rather than take another of the threads.
const unanswered = new Map<string, { readonly since: number }>();

/**
 * readRegularFile, failing with UnansweredRead when no answer came within READ_WAIT_MS, or at
 * once while an earlier read of the file has gone unanswered that long; a read that got no answer
 * is left to finish on its own.
 */
export function readRegularFileWithin(path: string, cap: number): Promise<string> {
  const key = `${cap}\0${resolve(path)}`;
  const earlier = unanswered.get(key);
  if (earlier !== undefined && performance.now() - earlier.since >= READ_WAIT_MS) {
    return Promise.reject(new UnansweredRead());
  }
  const entry = { since: performance.now() };
  unanswered.set(key, entry);
  const text = readRegularFile(path, cap);
  const answered = () => {
    if (unanswered.get(key) === entry) unanswered.delete(key);
  };
  text.then(answered, answered);
  return new Promise((done, fail) => {
    const timer = setTimeout(() => fail(new UnansweredRead()), READ_WAIT_MS);
    text.then(
      (value) => {
        clearTimeout(timer);
        done(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        fail(error);
      },
    );
  });
}
