/**
 * The language tables compiled once per config snapshot, and the RFC 4647 §3.4 lookup that both
 * Accept-Language and translation_language use.
 */
import type { FileConfig } from "../config/schema.js";

/** Supported languages ready for lookup. */
export interface LanguageTable {
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
 * longest supported tag are never tried, so the work is bounded whatever the range's length.
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
      const found = findTag(text, start, stop, table.supported);
      if (found >= 0) return found;
    }
    stop--;
    while (stop > start && !isSeparator(text.charCodeAt(stop))) stop--;
  }
  return -1;
}

// Compares in place rather than building a lower-cased copy: the hot path allocates nothing.
function findTag(text: string, start: number, stop: number, supported: readonly string[]): number {
  const length = stop - start;
  for (let k = 0; k < supported.length; k++) {
    const tag = supported[k] as string;
    if (tag.length !== length) continue;
    let i = 0;
    while (i < length && sameChar(text.charCodeAt(start + i), tag.charCodeAt(i))) i++;
    if (i === length) return k;
  }
  return -1;
}

// `tagCode` is from a lower-case tag; `code` may be upper-case, and `_` stands for `-`.
function sameChar(code: number, tagCode: number): boolean {
  if (code === tagCode) return true;
  if (code === UNDERSCORE) return tagCode === HYPHEN;
  return code >= 0x41 && code <= 0x5a && (code | 0x20) === tagCode;
}
