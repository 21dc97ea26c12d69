/**
 * Reading the files the configuration names, and the configuration itself, as nginx and Envoy
 * do: only a regular file of a bounded size is read. Each is opened without waiting (a FIFO would
 * otherwise hold the open until a writer came) and looked at before a byte is read, so a FIFO, a
 * device or a folder put at a configured path is a refused file, never a stopped process.
 */
import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats } from "node:fs";
import { open } from "node:fs/promises";

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

/** Why a read of a file failed, for a message: what is there instead, or the system's code. */
export function unreadableReason(error: unknown): string {
  if (error instanceof UnfitFile) return error.message;
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

/** readRegularFile, for the few checks that run synchronously. */
export function readRegularFileSync(path: string, cap: number): string {
  const fd = openSync(path, NOT_WAITING);
  try {
    check(fstatSync(fd), cap);
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}
