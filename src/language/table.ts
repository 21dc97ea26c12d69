/**
 * The language tables compiled once per config snapshot, and the RFC 4647 §3.4 lookup that both
 * Accept-Language and translation_language use.
 */
import type { FileConfig } from "../config/schema.js";

/** Supported languages ready for lookup. */
export interface LanguageTable {
  /** Lower-case tag -> its index in `supported`. */
  readonly index: ReadonlyMap<string, number>;
  /** The supported tags, lower-case, in config order. */
  readonly supported: readonly string[];
  /** The tag used when nothing else matches. */
  readonly default: string;
  /** The length of the longest supported tag: longer prefixes of a range cannot match. */
  readonly maxLength: number;
}

/** How the translation parameter is canonicalised. */
export interface TranslationRules {
  readonly table: LanguageTable;
  readonly parameter: string;
  readonly max: number;
  readonly dropUnsupported: boolean;
  readonly forwardAs: "comma" | "repeat";
}

/** The `languages` section of a snapshot. */
export interface LanguageSettings {
  readonly table: LanguageTable;
  readonly translation: TranslationRules;
}

/** Compiles the `languages` section of the file. */
export function compileLanguages(config: FileConfig["languages"]): LanguageSettings {
  const supported = config.supported.map((tag) => tag.toLowerCase());
  const table: LanguageTable = {
    index: new Map(supported.map((tag, i) => [tag, i])),
    supported,
    default: config.default.toLowerCase(),
    maxLength: Math.max(...supported.map((tag) => tag.length)),
  };
  const { translation } = config;
  return {
    table,
    translation: {
      table,
      parameter: translation.parameter,
      max: translation.max,
      dropUnsupported: translation.on_unsupported === "drop",
      forwardAs: translation.forward_as,
    },
  };
}

const HYPHEN = 0x2d;
const UNDERSCORE = 0x5f;

function isSeparator(code: number): boolean {
  return code === HYPHEN || code === UNDERSCORE;
}

/**
 * RFC 4647 §3.4 lookup of the well-formed range `text[start, end)` (`_` read as `-`): the index
 * of the longest supported prefix ending at a subtag boundary, or -1. Prefixes longer than the
 * longest supported tag are never built, so the work is bounded whatever the range's length.
 */
export function lookupRange(
  text: string,
  start: number,
  end: number,
  table: LanguageTable,
): number {
  let stop = end;
  if (stop - start > table.maxLength) {
    stop = start + table.maxLength;
    while (stop > start && !isSeparator(text.charCodeAt(stop))) stop--;
  }
  while (stop > start) {
    // §3.4: a truncation that ends with a single-character subtag drops that subtag as well.
    const singleton = stop - start > 2 && isSeparator(text.charCodeAt(stop - 2));
    if (!singleton) {
      let candidate = text.slice(start, stop).toLowerCase();
      if (candidate.includes("_")) candidate = candidate.replaceAll("_", "-");
      const found = table.index.get(candidate);
      if (found !== undefined) return found;
    }
    stop--;
    while (stop > start && !isSeparator(text.charCodeAt(stop))) stop--;
  }
  return -1;
}
