/**
 * The files one reading of the configuration read: the config file and the key, JWKS and CA files
 * it names, each with a digest of what it held. They are the snapshot's identity (a key file
 * replaced under an unchanged config is a change) and what the watch compares the disk with.
 */
import { createHash } from "node:crypto";
import { CONFIG_CAP, readRegularFileWithin, UnansweredRead } from "./regular-file.js";

/** Absolute path -> digest of what the file held, or of why it could not be read. */
export type FileDigests = ReadonlyMap<string, string>;

/** Filled in by one reading of the configuration, file by file. */
export type FilesRead = Map<string, string>;

/** sha256 of a file's text, hex. */
export function fileHash(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** The digest recorded for a file that could not be read: its return is a change. */
function unreadableDigest(error: unknown): string {
  return `unreadable: ${(error as NodeJS.ErrnoException).code ?? String(error)}`;
}

/** What `path` holds now, as a reading would record it. */
export async function digestNow(path: string): Promise<string> {
  try {
    return fileHash(await readRegularFileWithin(path, CONFIG_CAP));
  } catch (error) {
    return unreadableDigest(error);
  }
}

/**
 * What to record for `path`, whose reading failed with `error`: what it holds now (a file over
 * its cap has a content the watch compares), or, when the read got no answer, that it got none,
 * without asking a file system that is not answering again.
 */
export function digestAfter(path: string, error: unknown): Promise<string> {
  return error instanceof UnansweredRead
    ? Promise.resolve(unreadableDigest(error))
    : digestNow(path);
}

/** One digest for all the files read, whatever the order they were read in. */
export function identityOf(files: FileDigests): string {
  const hash = createHash("sha256");
  for (const path of [...files.keys()].sort()) hash.update(`${path}\0${files.get(path)}\n`);
  return hash.digest("hex");
}

/** The files read by both readings whose content differs, for a reload's log line. */
export function changedFiles(before: FileDigests, after: FileDigests): string[] {
  return [...after.keys()].filter(
    (path) => before.has(path) && before.get(path) !== after.get(path),
  );
}
