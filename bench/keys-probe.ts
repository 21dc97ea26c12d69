/**
 * The memory store's cost per tracked client, measured in a process of its own run with
 * `--expose-gc`: heap bytes and CPU time per new counter for 100k distinct clients, and the heap
 * still held once their windows have ended and the store has swept them. Prints one JSON line.
 */
import { createMemoryStore } from "../src/limits/memory-store.js";
import type { Slot } from "../src/limits/counters.js";
import { clientAddress } from "./drive.js";

/** What one measurement found, per key. */
export interface KeysProbe {
  readonly keys: number;
  readonly bytesPerKey: number;
  readonly cpuUsPerKey: number;
  /** Heap still held per key after every counter ended and was swept. */
  readonly bytesPerKeyAfterExpiry: number;
  readonly repetitions: number;
}

const KEYS = 100_000;
const REPETITIONS = 5;
const WINDOW_MS = 60_000;
// The anonymous plan's rate limit, as gatehouse names its counter.
const SLOTS: readonly Slot[] = [
  { name: `rate:plan:anonymous:default:${WINDOW_MS}`, limit: 1_000_000, ttlMs: WINDOW_MS },
];

const collect = globalThis.gc;
if (collect === undefined) throw new Error("run with node --expose-gc");

function heapUsed(): number {
  // Twice: a first collection can leave garbage that only a second one frees (weak references).
  collect?.();
  collect?.();
  return process.memoryUsage().heapUsed;
}

function cpuUs(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

function measureOnce(subjects: readonly string[]) {
  let now = Date.UTC(2026, 0, 1);
  const store = createMemoryStore({ now: () => now, sweepEveryMs: 0 });
  const before = heapUsed();
  const cpuBefore = cpuUs();
  for (const subject of subjects) store.commit(subject, SLOTS, 1, false, now);
  const cpu = cpuUs() - cpuBefore;
  const held = heapUsed() - before;
  const { counters } = store.footprint();
  if (counters !== subjects.length) throw new Error(`${counters} counters tracked`);
  now += WINDOW_MS + 1;
  store.sweep(now);
  const after = heapUsed() - before;
  store.close();
  return { held, cpu, after };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1] as number;
}

// Subjects as the limits stage makes them, made before measuring so that only the store counts.
const subjects = Array.from({ length: KEYS }, (_, i) => `ip:${clientAddress(10, i)}`);
// One unmeasured round first: the JIT compiles the store's paths as it would in service.
measureOnce(subjects);
const runs = Array.from({ length: REPETITIONS }, () => measureOnce(subjects));
const result: KeysProbe = {
  keys: KEYS,
  bytesPerKey: median(runs.map((run) => run.held / KEYS)),
  cpuUsPerKey: median(runs.map((run) => run.cpu / KEYS)),
  bytesPerKeyAfterExpiry: median(runs.map((run) => run.after / KEYS)),
  repetitions: REPETITIONS,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
