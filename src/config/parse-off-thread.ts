/**
 * Parses and validates config text for a reload: a large file on a worker thread (see
 * parse-worker), a small one at once, since starting a worker costs more than parsing it.
 */
import { extname } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { Surroundings } from "./environment.js";
import {
  ConfigError,
  parseConfigText,
  type ConfigProblem,
  type LocatedKeyFile,
  type ParsedConfig,
} from "./load.js";
import type { ParseReply, ParseRequest } from "./parse-worker.js";
import type { RouteConfig } from "./schema.js";

// The worker is this module's sibling, compiled or not alike (the sources run under a TypeScript
// loader as well as built).
const WORKER = new URL(`./parse-worker${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

// Parsing runs at about 1 µs per byte once warm (the YAML parser dominates), twice that on a
// loaded machine: below this size a reload holds the event loop for some 15 to 35 ms, less than
// starting a worker costs.
const OFF_THREAD_BYTES = 16 * 1024;

/** Parses `text` for a reload, off the main thread when it is large; throws ConfigError. */
export async function parseForReload(
  text: string,
  name: string,
  around: Surroundings,
): Promise<ParsedConfig> {
  if (text.length < OFF_THREAD_BYTES) return parseConfigText(text, name, around);
  return parseOffThread(text, name, around);
}

type WorkerMessage =
  { parsed: ParseReply } | { problems: ConfigProblem[]; keyFiles: LocatedKeyFile[] };

// The parsed file from the worker's reply, its routes read a slice per turn of the event loop.
async function assembled({ file, routes: slices, ...rest }: ParseReply): Promise<ParsedConfig> {
  const routes: RouteConfig[] = [];
  for (const slice of slices) {
    routes.push(...(JSON.parse(slice) as RouteConfig[]));
    await nextTurn();
  }
  return { ...rest, file: { ...file, routes } };
}

/** Parses `text` off the main thread; throws ConfigError as parsing on it would. */
function parseOffThread(text: string, name: string, around: Surroundings): Promise<ParsedConfig> {
  const request: ParseRequest = {
    text,
    name,
    around: { env: { ...around.env }, baseDir: around.baseDir },
  };
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { workerData: request });
    let reply: WorkerMessage | undefined;
    worker.once("message", (message: WorkerMessage) => (reply = message));
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (reply === undefined) reject(new Error(`the config parser exited with ${code}`));
      else if ("parsed" in reply) resolve(assembled(reply.parsed));
      else reject(new ConfigError(name, reply.problems, reply.keyFiles));
    });
  });
}
