/**
 * Parsing and validating a large file takes the better part of a second: a reload does it on a
 * worker thread, so requests in flight are not held meanwhile. The worker parses one text and
 * exits; the problems of a refused file come back as plain data.
 */
import { parentPort, workerData } from "node:worker_threads";
import { ConfigError, parseConfigText, type ParsedConfig } from "./load.js";
import type { Surroundings } from "./environment.js";
import type { FileConfig } from "./schema.js";

/** What the worker is given. */
export interface ParseRequest {
  readonly text: string;
  readonly name: string;
  readonly around: Surroundings;
}

/**
 * A parsed file as it crosses back: the routes as JSON text, a slice of them per string. A
 * message is read on the receiving thread in one go, and 10,000 routes as objects took it some
 * 20 ms; the slices are parsed there one turn of its event loop at a time.
 */
export interface ParseReply extends Omit<ParsedConfig, "file"> {
  readonly file: Omit<FileConfig, "routes">;
  readonly routes: readonly string[];
}

const ROUTES_PER_SLICE = 500;

const { text, name, around } = workerData as ParseRequest;
try {
  const parsed = parseConfigText(text, name, around);
  const { routes, ...file } = parsed.file;
  const slices: string[] = [];
  for (let start = 0; start < routes.length; start += ROUTES_PER_SLICE) {
    slices.push(JSON.stringify(routes.slice(start, start + ROUTES_PER_SLICE)));
  }
  const reply: ParseReply = { file, routes: slices, text: parsed.text, warnings: parsed.warnings };
  parentPort?.postMessage({ parsed: reply });
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  parentPort?.postMessage({ problems: error.problems, keyFiles: error.keyFiles });
}
