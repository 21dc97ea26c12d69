/**
 * The memory store's counters on disk, so a rolling restart does not hand every client a fresh
 * quota. Written on graceful shutdown, read at start; each counter keeps its own end, so a long
 * window (a monthly quota) goes on where it was.
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import type { Logger } from "pino";
import { z } from "zod";
import type { MemoryStore, SavedCounter } from "./memory-store.js";

// Version 2: one list of counters, each with its end. Files of version 1 (counters of the earlier
// limiter, by rule) are reported as unreadable: counters then start empty, as without a file.
const StateSchema = z.object({
  version: z.literal(2),
  savedAt: z.number(),
  counters: z.array(z.object({ key: z.string(), value: z.number(), endsAt: z.number() })),
});

/** What reading the state file found. */
export type StateRead =
  | { readonly kind: "loaded"; readonly counters: readonly SavedCounter[] }
  | { readonly kind: "missing" }
  | { readonly kind: "invalid"; readonly reason: string };

/** Reads the counters saved at `path`; a missing or unreadable file is reported, never thrown. */
export async function readStateFile(path: string): Promise<StateRead> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
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
  return { kind: "loaded", counters: parsed.data.counters };
}

/** Writes `counters` to `path` through a temporary file and a rename, so readers never see half. */
export async function writeStateFile(
  path: string,
  counters: readonly SavedCounter[],
  nowMs: number,
): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, JSON.stringify({ version: 2, savedAt: nowMs, counters }), {
    mode: 0o600,
  });
  await rename(temporary, path);
}

/** Puts the counters saved at `path` back into `store`; problems are logged, never fatal. */
export async function restoreCounters(
  store: MemoryStore,
  path: string,
  nowMs: number,
  log: Logger,
): Promise<void> {
  const read = await readStateFile(path);
  if (read.kind === "loaded") {
    store.restore(read.counters, nowMs);
    log.info({ stateFile: path }, "limit counters restored from the state file");
  } else if (read.kind === "invalid") {
    // Starting with fresh counters beats not starting: the file is only an optimisation.
    log.warn(
      { stateFile: path, reason: read.reason },
      "state file unreadable; counters start empty",
    );
  }
}

/** Saves the counters of `store` to `path`; a failure is logged, so shutdown still completes. */
export async function saveCounters(
  store: MemoryStore,
  path: string,
  nowMs: number,
  log: Logger,
): Promise<void> {
  try {
    await writeStateFile(path, store.save(nowMs), nowMs);
    log.info({ stateFile: path }, "limit counters saved to the state file");
  } catch (error) {
    log.error({ stateFile: path, err: error }, "could not save the limit counters");
  }
}
