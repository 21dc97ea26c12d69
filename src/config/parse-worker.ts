/**
 * Parsing and validating a large file takes the better part of a second: a reload does it on a
 * worker thread, so requests in flight are not held meanwhile. The worker parses one text and
 * exits; the problems of a refused file come back as plain data.
 */
import { parentPort, workerData } from "node:worker_threads";
import { ConfigError, parseConfigText } from "./load.js";
import type { Surroundings } from "./environment.js";

/** What the worker is given. */
export interface ParseRequest {
  readonly text: string;
  readonly name: string;
  readonly around: Surroundings;
}

const { text, name, around } = workerData as ParseRequest;
try {
  parentPort?.postMessage({ parsed: parseConfigText(text, name, around) });
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  parentPort?.postMessage({ problems: error.problems });
}
