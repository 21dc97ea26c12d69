/**
 * Reads the configuration file: YAML 1.2 (core schema, unique keys, bounded aliases), then the
 * schema. There is one reading: `check`, the start and every reload call parseConfigText, so a
 * file is accepted or refused the same way wherever it is read. Every problem is reported at
 * once, each with its line and column; a file that is not well-formed YAML, only for that.
 */
import {
  isAlias,
  isMap,
  isScalar,
  isSeq,
  LineCounter,
  parseDocument,
  type Document,
  type Node,
} from "yaml";
import { z } from "zod";
import {
  environmentNeeds,
  keyFileProblems,
  type NamedKeyFile,
  type Surroundings,
} from "./environment.js";
import { where } from "./key-path.js";
import { CONFIG_CAP, readRegularFileWithin, unreadableReason } from "./regular-file.js";
import { FileSchema, type FileConfig } from "./schema.js";
import type { BuildProblem } from "./problem.js";
import { configWarnings } from "./warnings.js";

/** One problem in the configuration file, at a line and column (both from 1). */
export interface ConfigProblem {
  readonly line: number;
  readonly col: number;
  readonly message: string;
}

/** A key file a refused file names, at the line and column of its key. */
export type LocatedKeyFile = NamedKeyFile & Position;

/** The configuration could not be used; `problems` lists every reason. */
export class ConfigError extends Error {
  readonly code = "invalid_config";
  /** The problems in line order, whatever order they were found in (key files are read at once). */
  readonly problems: readonly ConfigProblem[];
  constructor(
    readonly file: string,
    found: readonly ConfigProblem[],
    /** The key files a refused file names, still to be read by withKeyFileProblems. */
    readonly keyFiles: readonly LocatedKeyFile[] = [],
  ) {
    const problems = [...found].sort((a, b) => a.line - b.line || a.col - b.col);
    super(problems.map((p) => `${file}:${p.line}:${p.col} ${p.message}`).join("\n"));
    this.problems = problems;
    this.name = "ConfigError";
  }
}

/** A line and a column, both from 1; columns count characters. */
export type Position = { line: number; col: number };

/**
 * A parsed file: its validated content, and its text, for locating a problem that building it
 * finds (an unset secret, an unreadable key file). Plain data, so it can cross threads.
 */
export interface ParsedConfig {
  readonly file: FileConfig;
  readonly text: string;
  /**
   * The file's warnings (warnings.ts), located while its document was at hand: a reload that read
   * a large file on a worker thread would otherwise read it again on the main one to place them.
   */
  readonly warnings: readonly ConfigProblem[];
}

// The document a file was read into on this thread, kept for locating what building the snapshot
// finds; a file read on another thread is read again here, once, if a problem must be located.
const documents = new WeakMap<ParsedConfig, Document>();

/**
 * Problems that building `parsed` found at data paths (an unset secret, an unreadable key file),
 * located in its text; a file read on another thread is read again here, once.
 */
export function locateProblems(
  parsed: ParsedConfig,
  problems: readonly BuildProblem[],
): ConfigProblem[] {
  let doc = documents.get(parsed);
  if (doc === undefined) documents.set(parsed, (doc = readDocument(parsed.text)));
  return located(parsed.text, doc, problems);
}

// Problems about data paths, given the lines and columns of those paths in `text`.
function located(text: string, doc: Document, problems: readonly BuildProblem[]): ConfigProblem[] {
  if (problems.length === 0) return [];
  const at = positions(text);
  return problems.map(({ path, message }) => ({
    ...at(offsetOf(doc, path)),
    message: `${where(path)}: ${message}`,
  }));
}

function readDocument(text: string): Document {
  return parseDocument(text, { uniqueKeys: true, prettyErrors: false, strict: true });
}

/** Reads `path` whole; throws ConfigError when it cannot be read. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readRegularFileWithin(path, CONFIG_CAP);
  } catch (error) {
    const reason = unreadableReason(error);
    const problems = [{ line: 1, col: 1, message: `cannot be read (${reason})` }];
    throw reason === "ENOENT"
      ? new MissingConfigError(path, problems)
      : new ConfigError(path, problems);
  }
}

/** The configuration file does not exist: at a start, most likely the wrong one was named. */
export class MissingConfigError extends ConfigError {}

/** A problem found at an offset in the text, before it is given a line and a column. */
type Found = { readonly offset: number; readonly message: string };

/**
 * Parses and validates configuration text; `name` is used in error messages. With `around`, a
 * file that is refused is also checked for unset variables, and its error names the key files to
 * read for withKeyFileProblems, so that the error lists every kind of problem at once.
 */
export function parseConfigText(text: string, name: string, around?: Surroundings): ParsedConfig {
  const doc = readDocument(text);
  // A file that is not well-formed YAML is refused for that alone: around an error the parser
  // guesses (a key cut short swallows the lines below it, a mapping ends early), and the schema's
  // verdict on that guess would name lines and plans the author did not get wrong.
  if (doc.errors.length > 0) {
    const found = doc.errors.map((e) => ({
      offset: e.pos[0],
      message: yamlMessage(e.code, e.message),
    }));
    throw refused(name, text, found);
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 }) ?? {};
  } catch (error) {
    throw refused(name, text, [{ offset: 0, message: `YAML: ${(error as Error).message}` }]);
  }
  const result = FileSchema.safeParse(data, { reportInput: true });
  if (result.success) {
    const warnings = located(text, doc, configWarnings(result.data, around?.env ?? {}));
    const parsed = { file: result.data, text, warnings };
    documents.set(parsed, doc);
    return parsed;
  }
  const found: Found[] = result.error.issues.flatMap((issue) => describeIssue(issue, doc));
  const needs = around === undefined ? undefined : environmentNeeds(data, around);
  for (const { path, message } of needs?.problems ?? []) {
    found.push({ offset: offsetOf(doc, path), message: `${where(path)}: ${message}` });
  }
  const keyFiles = (needs?.keyFiles ?? []).map((named) => ({
    ...named,
    offset: offsetOf(doc, named.path),
  }));
  throw refused(name, text, found, keyFiles);
}

function refused(
  name: string,
  text: string,
  found: readonly Found[],
  keyFiles: ReadonlyArray<NamedKeyFile & { readonly offset: number }> = [],
): ConfigError {
  const at = positions(text);
  return new ConfigError(
    name,
    found.map(({ offset, message }) => ({ ...at(offset), message })),
    keyFiles.map(({ path, file, offset }) => ({ path, file, ...at(offset) })),
  );
}

/**
 * `error` with the problems of the key files a refused file names (unreadable, empty), each at
 * its key's line and column. They are read here, not where the text was parsed, since a read of
 * a file system that does not answer may wait (for READ_WAIT_MS, at most).
 */
export async function withKeyFileProblems(
  error: ConfigError,
  around: Surroundings,
): Promise<ConfigError> {
  if (error.keyFiles.length === 0) return error;
  const found = await Promise.all(
    error.keyFiles.map(async (named) =>
      (await keyFileProblems(named, around)).map(({ path, message }) => ({
        line: named.line,
        col: named.col,
        message: `${where(path)}: ${message}`,
      })),
    ),
  );
  return new ConfigError(error.file, [...error.problems, ...found.flat()]);
}

function yamlMessage(code: string, message: string): string {
  const first = (message.split("\n")[0] ?? message).replace(/ at line \d+, column \d+:?$/, "");
  if (code === "DUPLICATE_KEY") return "duplicate key: each key may appear only once in a mapping";
  return `YAML: ${first}`;
}

/**
 * Turns offsets in `text` into lines and columns. Lines end at LF (CRLF included), as the parser
 * counts them; a lone CR ends no line. Columns count characters as a reader does (code points,
 * not UTF-16 units, and no byte order mark): a key after an emoji is at the column an editor
 * shows.
 */
function positions(text: string): (offset: number) => Position {
  const lines = new LineCounter();
  lines.addNewLine(0);
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines.addNewLine(i + 1);
  return (offset) => {
    const { line, col } = lines.linePos(offset);
    let characters = 0;
    for (let i = offset - (col - 1); i < offset; i++) {
      const code = text.charCodeAt(i);
      if ((code < 0xdc00 || code > 0xdfff) && !(i === 0 && code === 0xfeff)) characters++;
    }
    return { line, col: characters + 1 };
  };
}

function describeIssue(issue: z.core.$ZodIssue, doc: Document): Found[] {
  const path = issue.path;
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => ({
      offset: keyOffset(doc, path, key),
      message: `${where([...path, key])}: unknown key${suggestion(key, allowedKeys(path))}`,
    }));
  }
  // A record's key failed its own schema: report that schema's message at the key.
  if (issue.code === "invalid_key") {
    const key = String(path[path.length - 1]);
    const parent = path.slice(0, -1);
    return issue.issues.map((inner) => ({
      offset: keyOffset(doc, parent, key),
      message: `${where(path)}: ${inner.message}`,
    }));
  }
  const message =
    issue.code === "invalid_type" && issue.input === undefined
      ? missing(issue.message)
      : issue.message;
  return [{ offset: offsetOf(doc, path), message: `${where(path)}: ${message}` }];
}

function missing(message: string): string {
  return message.startsWith("is required") ? message : "is required";
}

function suggestion(key: string, allowed: readonly string[]): string {
  if (allowed.length === 0) return "";
  const close = allowed
    .map((a) => ({ a, d: editDistance(key.toLowerCase(), a) }))
    .filter(({ d }) => d <= 2)
    .sort((x, y) => x.d - y.d)[0];
  const hint = close ? `; did you mean "${close.a}"?` : "";
  return `${hint} (allowed here: ${allowed.join(", ")})`;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0] as number;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j] as number;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(above + 1, (row[j - 1] as number) + 1, diagonal + cost);
      diagonal = above;
    }
  }
  return row[b.length] as number;
}

/** The keys the schema allows at an object path (array indexes and record names are stepped over). */
function allowedKeys(path: readonly PropertyKey[]): string[] {
  let schema: z.ZodType | undefined = FileSchema;
  for (const step of path) {
    schema = unwrap(schema);
    if (schema instanceof z.ZodObject)
      schema = (schema.shape as Record<string, z.ZodType>)[String(step)];
    else if (schema instanceof z.ZodArray) schema = schema.element as z.ZodType;
    else if (schema instanceof z.ZodRecord) schema = schema.valueType as z.ZodType;
    else return [];
    if (schema === undefined) return [];
  }
  const found = unwrap(schema);
  return found instanceof z.ZodObject ? Object.keys(found.shape) : [];
}

/** The schema inside optional, defaulted and refined-by-pipe wrappers. */
function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    if (
      current instanceof z.ZodOptional ||
      current instanceof z.ZodNullable ||
      current instanceof z.ZodDefault ||
      current instanceof z.ZodPrefault
    ) {
      current = current.unwrap() as z.ZodType;
    } else if (current instanceof z.ZodPipe) current = current.in as z.ZodType;
    else return current;
  }
}

// The node at `key` of a mapping or sequence, aliases followed; keys compare as the data does
// (a YAML key `1` is the data's "1").
function child(doc: Document, node: unknown, key: PropertyKey): Node | undefined {
  const container = isAlias(node) ? node.resolve(doc) : node;
  if (isSeq(container)) return container.items[Number(key)] as Node | undefined;
  if (!isMap(container)) return undefined;
  const pair = container.items.find((p) => isScalar(p.key) && String(p.key.value) === String(key));
  return pair?.value as Node | undefined;
}

/** Offset of the deepest node that exists along `path` (the value itself when present). */
function offsetOf(doc: Document, path: readonly PropertyKey[]): number {
  let node: unknown = doc.contents;
  let offset = (doc.contents as Node | null)?.range?.[0] ?? 0;
  for (const key of path) {
    const parent = node;
    node = child(doc, node, key);
    const range = (node as Node | undefined)?.range;
    if (range === undefined || range === null) break;
    // An empty value (`timeout:` and nothing) has no text of its own: point at its key.
    offset = range[0] === range[1] ? keyIn(doc, parent, String(key), range[0]) : range[0];
  }
  return offset;
}

/** Offset of `key` itself inside the mapping at `path`. */
function keyOffset(doc: Document, path: readonly PropertyKey[], key: string): number {
  let map: unknown = doc.contents;
  for (const step of path) map = child(doc, map, step);
  return keyIn(doc, map, key, offsetOf(doc, path));
}

function keyIn(doc: Document, node: unknown, key: string, otherwise: number): number {
  const map = isAlias(node) ? node.resolve(doc) : node;
  if (isMap(map)) {
    for (const pair of map.items) {
      if (isScalar(pair.key) && String(pair.key.value) === key && pair.key.range) {
        return pair.key.range[0];
      }
    }
  }
  return otherwise;
}
