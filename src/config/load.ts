/**
 * Reads the configuration file: YAML 1.2 (core schema, unique keys, bounded aliases), then the
 * schema. Every problem is reported at once, each with its line and column. A plain file that the
 * schema accepts is read the fast way (plain-yaml); anything else, and every position, comes
 * from the full parser.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type * as Yaml from "yaml";
import type { Document, LineCounter, Node } from "yaml";
import { z } from "zod";
import { environmentProblems, type Surroundings } from "./environment.js";
import { where } from "./key-path.js";
import { readPlainYaml } from "./plain-yaml.js";
import { FileSchema, type FileConfig } from "./schema.js";

let yamlModule: typeof Yaml | undefined;

/**
 * The full parser, loaded the first time a file needs it: a file that is plain and valid never
 * does, and it is a tenth of what gatehouse would otherwise load at start.
 */
function yaml(): typeof Yaml {
  yamlModule ??= createRequire(import.meta.url)("yaml") as typeof Yaml;
  return yamlModule;
}

/** One problem in the configuration file, at a line and column (both from 1). */
export interface ConfigProblem {
  readonly line: number;
  readonly col: number;
  readonly message: string;
}

/** The configuration could not be used; `problems` lists every reason. */
export class ConfigError extends Error {
  readonly code = "invalid_config";
  constructor(
    readonly file: string,
    readonly problems: readonly ConfigProblem[],
  ) {
    super(problems.map((p) => `${file}:${p.line}:${p.col} ${p.message}`).join("\n"));
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
}

/** The full parser's reading of a file, with positions in its text as a reader counts them. */
interface FullParse {
  readonly doc: Document;
  readonly at: (offset: number) => Position;
}

const located = new WeakMap<ParsedConfig, FullParse>();

/**
 * Where `path` is in a parsed file. Only a file with a problem is located, so its text is read
 * again by the full parser then, once for all its problems.
 */
export function locate(parsed: ParsedConfig, path: readonly PropertyKey[]): Position {
  let full = located.get(parsed);
  if (full === undefined) located.set(parsed, (full = fullParse(parsed.text)));
  return full.at(offsetOf(full.doc, path));
}

function fullParse(text: string): FullParse {
  const { LineCounter, parseDocument } = yaml();
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, {
    lineCounter,
    uniqueKeys: true,
    prettyErrors: false,
    strict: true,
  });
  return { doc, at: (offset) => position(text, lineCounter, offset) };
}

/** Reads `path` whole; throws ConfigError when it cannot be read. */
export async function readConfigText(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError(path, [{ line: 1, col: 1, message: `cannot be read (${reason})` }]);
  }
}

/**
 * Parses and validates configuration text; `name` is used in error messages. With `around`, a
 * file the schema refuses is also checked for unset variables and unreadable key files, so that
 * the error lists every kind of problem at once.
 */
export function parseConfigText(text: string, name: string, around?: Surroundings): ParsedConfig {
  const plain = readPlainYaml(text);
  if (plain !== undefined) {
    const result = FileSchema.safeParse(plain.value ?? {}, { reportInput: true });
    if (result.success) return { file: result.data, text };
  }
  const { doc, at } = fullParse(text);
  if (doc.errors.length > 0) {
    throw new ConfigError(
      name,
      doc.errors.map((e) => ({ ...at(e.pos[0]), message: yamlMessage(e.code, e.message) })),
    );
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    throw new ConfigError(name, [
      { line: 1, col: 1, message: `YAML: ${(error as Error).message}` },
    ]);
  }
  if (data === null || data === undefined) data = {};
  const result = FileSchema.safeParse(data, { reportInput: true });
  if (!result.success) {
    const problems = result.error.issues.flatMap((issue) => describeIssue(issue, doc, at));
    for (const { path, message } of around ? environmentProblems(data, around) : []) {
      problems.push({ ...at(offsetOf(doc, path)), message: `${where(path)}: ${message}` });
    }
    problems.sort((a, b) => a.line - b.line || a.col - b.col);
    throw new ConfigError(name, problems);
  }
  return { file: result.data, text };
}

function yamlMessage(code: string, message: string): string {
  const first = (message.split("\n")[0] ?? message).replace(/ at line \d+, column \d+:?$/, "");
  if (code === "DUPLICATE_KEY") return "duplicate key: each key may appear only once in a mapping";
  return `YAML: ${first}`;
}

// Columns count characters as a reader does (code points), not UTF-16 units: a key after an
// emoji is at the column an editor shows.
function position(text: string, lines: LineCounter, offset: number): Position {
  const { line, col } = lines.linePos(offset);
  const start = offset - (col - 1);
  let characters = 0;
  for (let i = start; i < offset; i++) {
    const code = text.charCodeAt(i);
    if (code < 0xdc00 || code > 0xdfff) characters++;
  }
  return { line, col: characters + 1 };
}

function describeIssue(
  issue: z.core.$ZodIssue,
  doc: Document,
  at: (offset: number) => Position,
): ConfigProblem[] {
  const path = issue.path;
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => ({
      ...at(keyOffset(doc, path, key)),
      message: `${where([...path, key])}: unknown key${suggestion(key, allowedKeys(path))}`,
    }));
  }
  // A record's key failed its own schema: report that schema's message at the key.
  if (issue.code === "invalid_key") {
    const key = String(path[path.length - 1]);
    const parent = path.slice(0, -1);
    return issue.issues.map((inner) => ({
      ...at(keyOffset(doc, parent, key)),
      message: `${where(path)}: ${inner.message}`,
    }));
  }
  if (issue.code === "invalid_type" && issue.input === undefined) {
    return [{ ...at(offsetOf(doc, path)), message: `${where(path)}: ${missing(issue.message)}` }];
  }
  return [{ ...at(offsetOf(doc, path)), message: `${where(path)}: ${issue.message}` }];
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
  const { isAlias, isMap, isScalar, isSeq } = yaml();
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
  const { isAlias, isMap, isScalar } = yaml();
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
