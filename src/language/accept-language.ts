/**
 * Accept-Language (RFC 9110 §12.5.4) to exactly one supported tag, by RFC 4647 §3.4 lookup.
 * One pass over the header, at most MAX_MEMBERS members, no sort and no allocation: a hostile
 * header costs time linear in its length, and never an error.
 */
import { lookupRange, type LanguageTable } from "./table.js";

/** At most this many members are read, parsable or not: the work per header is bounded. */
export const MAX_MEMBERS = 32;

/** What one negotiation examined, so tests can bound the work without timing it. */
export interface WorkMeter {
  /** Members read (empty list elements are not members, RFC 9110 §5.6.1). */
  members: number;
  /** RFC 4647 lookups made; each tries at most `maxLength` prefixes against the table. */
  lookups: number;
}

const TAB = 0x09;
const SPACE = 0x20;
const STAR = 0x2a;
const COMMA = 0x2c;
const HYPHEN = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const ONE = 0x31;
const NINE = 0x39;
const SEMICOLON = 0x3b;
const EQUALS = 0x3d;
const UNDERSCORE = 0x5f;
const LOWER_Q = 0x71;
const MAX_SUBTAG = 8;

// Scratch for one call: calls are synchronous and never nest, so one set serves them all.
const matched = new Int32Array(MAX_MEMBERS);
const weights = new Int16Array(MAX_MEMBERS);
const excluded = new Int32Array(MAX_MEMBERS);

function isAlpha(code: number): boolean {
  const lower = code | 0x20;
  return lower >= 0x61 && lower <= 0x7a;
}

function isDigit(code: number): boolean {
  return code >= ZERO && code <= NINE;
}

function skipOws(text: string, i: number, n: number): number {
  while (i < n) {
    const code = text.charCodeAt(i);
    if (code !== SPACE && code !== TAB) break;
    i++;
  }
  return i;
}

/**
 * RFC 9110 §12.4.2: qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths;
 * -1 when `text[start, end)` is not one.
 */
export function parseQValue(text: string, start: number, end: number): number {
  const length = end - start;
  if (length < 1 || length > 5) return -1;
  const lead = text.charCodeAt(start);
  if (lead !== ZERO && lead !== ONE) return -1;
  if (length === 1) return lead === ONE ? 1000 : 0;
  if (text.charCodeAt(start + 1) !== DOT) return -1;
  let value = lead === ONE ? 1000 : 0;
  let scale = 100;
  for (let i = start + 2; i < end; i++) {
    const code = text.charCodeAt(i);
    if (!isDigit(code) || (lead === ONE && code !== ZERO)) return -1;
    value += (code - ZERO) * scale;
    scale /= 10;
  }
  return value;
}

/**
 * Reads a language range other than `*` from `text[start]`, `_` read as `-` (a common mistake in
 * clients' tags): the index just past its characters, or that index's complement (`~index`, below
 * zero) when they do not make a range.
 */
function readRange(text: string, start: number, n: number): number {
  let valid = true;
  let subtag = 0;
  let first = true;
  let i = start;
  for (; i < n; i++) {
    const code = text.charCodeAt(i);
    if (isAlpha(code) || (!first && isDigit(code))) {
      if (++subtag > MAX_SUBTAG) valid = false;
    } else if (code === HYPHEN || code === UNDERSCORE) {
      if (subtag === 0) valid = false;
      subtag = 0;
      first = false;
    } else {
      break;
    }
  }
  if (subtag === 0) valid = false;
  return valid ? i : ~i;
}

/**
 * The supported tag for an Accept-Language value: the range with the highest weight (the first
 * among equals) whose lookup finds a supported tag not excluded by `q=0`; else the default.
 */
export function negotiateLanguage(
  header: string | undefined,
  table: LanguageTable,
  meter?: WorkMeter,
): string {
  if (header === undefined) return table.default;
  const n = header.length;
  let i = 0;
  let members = 0;
  let lookups = 0;
  let candidates = 0;
  let exclusions = 0;
  while (i < n) {
    let code = header.charCodeAt(i);
    if (code === SPACE || code === TAB || code === COMMA) {
      i++;
      continue;
    }
    if (members === MAX_MEMBERS) break;
    members++;

    // RFC 4647 §2.1: language-range = (1*8ALPHA *("-" 1*8alphanum)) / "*".
    const tagStart = i;
    const star = code === STAR;
    const read = star ? i + 1 : readRange(header, i, n);
    let valid = read >= 0;
    i = valid ? read : ~read;
    const tagEnd = i;

    // RFC 9110 §12.4.2: weight = OWS ";" OWS "q=" qvalue; "q" is case-insensitive.
    let q = 1000;
    i = skipOws(header, i, n);
    if (i < n && header.charCodeAt(i) === SEMICOLON) {
      i = skipOws(header, i + 1, n);
      q = -1;
      if ((header.charCodeAt(i) | 0x20) === LOWER_Q && header.charCodeAt(i + 1) === EQUALS) {
        i += 2;
        const valueStart = i;
        while (i < n && (isDigit((code = header.charCodeAt(i))) || code === DOT)) i++;
        q = parseQValue(header, valueStart, i);
        i = skipOws(header, i, n);
      }
    }
    if (q < 0 || (i < n && header.charCodeAt(i) !== COMMA)) valid = false;
    while (i < n && header.charCodeAt(i) !== COMMA) i++;
    // `*` adds nothing: alone it means the default, beside other ranges it is skipped.
    if (!valid || star) continue;

    lookups++;
    const found = lookupRange(header, tagStart, tagEnd, table);
    if (found < 0) continue;
    if (q > 0) {
      matched[candidates] = found;
      weights[candidates] = q;
      candidates++;
    } else if (tagEnd - tagStart === (table.supported[found] as string).length) {
      // RFC 9110 §12.4.2: q=0 is "not acceptable"; only a range naming the supported tag itself
      // excludes it (`fr-CA;q=0` says nothing against `fr`).
      excluded[exclusions++] = found;
    }
  }
  if (meter !== undefined) {
    meter.members = members;
    meter.lookups = lookups;
  }
  const best = bestCandidate(candidates, exclusions);
  return best < 0 ? table.default : (table.supported[best] as string);
}

// The index in the table of the heaviest candidate (the first among equals) not excluded by
// `q=0`, or -1 when there is none.
function bestCandidate(candidates: number, exclusions: number): number {
  let best = -1;
  let bestWeight = 0;
  for (let k = 0; k < candidates; k++) {
    const weight = weights[k] as number;
    if (weight <= bestWeight) continue;
    const candidate = matched[k] as number;
    if (isExcluded(candidate, exclusions)) continue;
    best = candidate;
    bestWeight = weight;
  }
  return best;
}

function isExcluded(candidate: number, count: number): boolean {
  for (let k = 0; k < count; k++) if (excluded[k] === candidate) return true;
  return false;
}
