/**
 * The memory store's counters on disk, so a rolling restart does not hand every client a fresh
 * quota, with the process's marks (revoked token ids, used assertion ids, used DPoP proof ids), so
 * a restart does not make a revoked token valid again or a used assertion or proof usable twice
 * (RFC 7009 §2, RFC 7523 §3, RFC 9449 §11.1).
 * Written on graceful shutdown and soon after each new mark (stores.ts), read at start; each
 * counter and mark keeps its own end, so a long window (a monthly quota) goes on where it was.
 */
import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { open, readdir, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { readRegularFile } from "../config/regular-file.js";
import type { Logger } from "pino";
import { z } from "zod";
import type { MemoryStore, SavedCounter } from "./memory-store.js";

/** One saved mark: an id held for a client until its end (epoch milliseconds). */
export interface SavedMark {
  readonly client: string;
  readonly id: string;
  readonly endsAt: number;
}

/** The marks of a process, as saved. */
export interface SavedMarks {
  readonly used: readonly SavedMark[];
  readonly revoked: readonly SavedMark[];
  /** Used DPoP proof ids, each `<thumbprint> <jti>`, per client. */
  readonly proofs: readonly SavedMark[];
}

/** Marks that can be saved with the counters and put back after a restart. */
export interface MarksState {
  /** Every mark that has not ended at `nowMs`. */
  save(nowMs: number): SavedMarks;
  /** Puts saved marks back; those that ended by `nowMs` are left out. */
  restore(saved: SavedMarks, nowMs: number): void;
  /** Calls `added` after each mark is added (one listener; a later call replaces it). */
  watch(added: () => void): void;
}

const MarkSchema = z.object({ client: z.string(), id: z.string(), endsAt: z.number() });

// Version 2: one list of counters, each with its end, and the marks, which a file written before
// they were saved does not have (it loads with none; one written before proofs were saved loads
// with no proofs). Files of version 1 (counters of the earlier
// limiter, by rule) are reported as unreadable: counters then start empty, as without a file.
const StateSchema = z.object({
  version: z.literal(2),
  savedAt: z.number(),
  counters: z.array(z.object({ key: z.string(), value: z.number(), endsAt: z.number() })),
  marks: z
    .object({
      used: z.array(MarkSchema),
      revoked: z.array(MarkSchema),
      proofs: z.array(MarkSchema).default([]),
    })
    .default({ used: [], revoked: [], proofs: [] }),
});

const NO_MARKS: SavedMarks = Object.freeze({ used: [], revoked: [], proofs: [] });

/** What reading the state file found. */
export type StateRead =
  | {
      readonly kind: "loaded";
      readonly counters: readonly SavedCounter[];
      readonly marks: SavedMarks;
    }
  | { readonly kind: "missing" }
  | { readonly kind: "invalid"; readonly reason: string };

/** Reads the counters saved at `path`; a missing or unreadable file is reported, never thrown. */
export async function readStateFile(path: string): Promise<StateRead> {
  let text: string;
  try {
    text = await readRegularFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { kind: "missing" };
    return { kind: "invalid", reason: (error as Error).message };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { kind: "invalid", reason: (error as Error).message };
  }
  const parsed = StateSchema.safeParse(json);
  if (!parsed.success) return { kind: "invalid", reason: z.prettifyError(parsed.error) };
  return { kind: "loaded", counters: parsed.data.counters, marks: parsed.data.marks };
}

// A temporary state file: `<state_file>.<random>.tmp`, beside it.
const TEMPORARY_SUFFIX = ".tmp";

/**
 * Writes `counters` and `marks` to `path` through a temporary file and a rename, so readers never
 * see half. The temporary is a new file of gatehouse's own, under a name nobody can guess:
 * created exclusively (O_EXCL refuses a name that exists, a link planted there included, rather
 * than write through it), flushed to disk before the rename, removed when the write fails.
 */
export async function writeStateFile(
  path: string,
  counters: readonly SavedCounter[],
  nowMs: number,
  marks: SavedMarks = NO_MARKS,
): Promise<void> {
  const temporary = `${path}.${randomBytes(8).toString("hex")}${TEMPORARY_SUFFIX}`;
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;
  const handle = await open(temporary, flags, 0o600);
  try {
    await handle.writeFile(JSON.stringify({ version: 2, savedAt: nowMs, counters, marks }));
    await handle.sync();
  } catch (error) {
    await handle.close();
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  await handle.close();
  await rename(temporary, path);
}

/** Removes the temporaries of `path` that a killed write left behind; their names, at most. */
async function removeLeftovers(path: string): Promise<string[]> {
  const prefix = `${basename(path)}.`;
  let names: string[];
  try {
    names = await readdir(dirname(path));
  } catch {
    return [];
  }
  const left = names.filter((name) => name.startsWith(prefix) && name.endsWith(TEMPORARY_SUFFIX));
  for (const name of left) await unlink(join(dirname(path), name)).catch(() => undefined);
  return left;
}

/**
 * Puts the counters saved at `path` back into `store`, and the marks into `marks`; problems are
 * logged, never fatal.
 */
export async function restoreState(
  store: MemoryStore,
  marks: MarksState,
  path: string,
  nowMs: number,
  log: Logger,
): Promise<void> {
  const leftovers = await removeLeftovers(path);
  if (leftovers.length > 0) {
    log.info({ stateFile: path, removed: leftovers }, "removed temporaries of an unfinished save");
  }
  const read = await readStateFile(path);
  if (read.kind === "loaded") {
    store.restore(read.counters, nowMs);
    marks.restore(read.marks, nowMs);
    log.info(
      {
        stateFile: path,
        revoked: read.marks.revoked.length,
        usedAssertions: read.marks.used.length,
        usedProofs: read.marks.proofs.length,
      },
      "limit counters and token marks restored from the state file",
    );
  } else if (read.kind === "invalid") {
    // Starting with fresh counters beats not starting: the file is only an optimisation.
    log.warn(
      { stateFile: path, reason: read.reason },
      "state file unreadable; counters start empty",
    );
  }
}

/**
 * Saves the counters of `store` and the marks of `marks` to `path`; a failure is logged, so
 * shutdown still completes.
 */
export async function saveState(
  store: MemoryStore,
  marks: MarksState,
  path: string,
  nowMs: number,
  log: Logger,
): Promise<void> {
  try {
    await writeStateFile(path, store.save(nowMs), nowMs, marks.save(nowMs));
    log.info({ stateFile: path }, "limit counters and token marks saved to the state file");
  } catch (error) {
    log.error({ stateFile: path, err: error }, "could not save the limit counters");
  }
}
