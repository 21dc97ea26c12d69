/**
 * The translation parameter (docs/language.md) rewritten over the raw query string: every
 * occurrence merged into one canonical value that stands where the parameter first appeared; every
 * other byte of the query is forwarded as it came.
 */
import { formDecode } from "../http/form-decode.js";
import { lookupRange, type TranslationRules } from "./table.js";

/** What canonicalising a query decided. */
export type TranslationDecision =
  | { readonly kind: "absent" }
  | { readonly kind: "canonical"; readonly query: string | null; readonly codes: readonly string[] }
  | { readonly kind: "refused"; readonly message: string };

const ABSENT: TranslationDecision = Object.freeze({ kind: "absent" });

const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const AMPERSAND = 0x26;
const EQUALS = 0x3d;
const NAMED_LENGTH = 35;

/**
 * Canonicalises the translation parameter of `query` (raw, without `?`): decoded once, trimmed,
 * case-folded, reduced by RFC 4647 lookup, de-duplicated in first-seen order, capped at `max`.
 */
export function canonicaliseTranslation(
  query: string | null,
  rules: TranslationRules,
): TranslationDecision {
  const { parameter } = rules;
  // Fast path: the name can only be present written out or percent-encoded.
  if (query === null || (!query.includes(parameter) && !query.includes("%"))) return ABSENT;
  return canonicaliseSingle(query, rules) ?? canonicaliseAll(query, rules);
}

/**
 * The common case without splitting the query: nothing percent-encoded, the parameter once,
 * under its own name, and no `+` in its value. Undefined when the query is not that case.
 */
function canonicaliseSingle(
  query: string,
  rules: TranslationRules,
): TranslationDecision | undefined {
  const { parameter } = rules;
  // A `+` elsewhere cannot spell the name: it decodes to a space.
  if (query.includes("%")) return undefined;
  const at = query.indexOf(parameter);
  if (at < 0 || (at > 0 && query.charCodeAt(at - 1) !== AMPERSAND)) return undefined;
  const after = at + parameter.length;
  const next = query.charCodeAt(after);
  if (after < query.length && next !== EQUALS && next !== AMPERSAND) return undefined;
  if (query.includes(parameter, after)) return undefined;
  let end = query.indexOf("&", after);
  if (end < 0) end = query.length;
  const value = next === EQUALS ? query.slice(after + 1, end) : "";
  if (value.includes("+")) return undefined;
  const codes: string[] = [];
  const problem = collectCodes(value, rules, codes);
  if (problem !== undefined) return problem;
  if (codes.length > 0) {
    const pair = canonicalPair(codes, rules);
    return { kind: "canonical", query: query.slice(0, at) + pair + query.slice(end), codes };
  }
  // No code left: the pair goes, with the separator on one side of it.
  const rest =
    at > 0
      ? query.slice(0, at - 1) + query.slice(end)
      : query.slice(Math.min(end + 1, query.length));
  return { kind: "canonical", query: at === 0 && end === query.length ? null : rest, codes };
}

function canonicaliseAll(query: string, rules: TranslationRules): TranslationDecision {
  const { parameter } = rules;
  const kept: string[] = [];
  const codes: string[] = [];
  let at = -1;
  for (const part of query.split("&")) {
    const equals = part.indexOf("=");
    const rawName = equals < 0 ? part : part.slice(0, equals);
    const name = decodeName(rawName);
    if (name !== parameter) {
      // `p[]=` and `p[0]=` would become an array in qs-style parsers, past the `max` rule.
      if (name.startsWith(parameter) && name.charCodeAt(parameter.length) === 0x5b /* [ */) {
        return refused(
          `${parameter}[] and ${parameter}[N] are not accepted; send ${parameter}=fr,de`,
        );
      }
      kept.push(part);
      continue;
    }
    if (at < 0) {
      at = kept.length;
      kept.push("");
    }
    // Decoded exactly once: `%252C` stays `%2C`, not a comma.
    const value = formDecode(equals < 0 ? "" : part.slice(equals + 1));
    if (value === undefined) return refused(`${parameter} has a malformed percent-encoding`);
    const problem = collectCodes(value, rules, codes);
    if (problem !== undefined) return problem;
  }
  if (at < 0) return ABSENT;
  if (codes.length === 0) kept.splice(at, 1);
  else kept[at] = canonicalPair(codes, rules);
  return { kind: "canonical", query: kept.length === 0 ? null : kept.join("&"), codes };
}

/**
 * Adds the supported codes of one decoded value to `codes`, each once; the refusal when a member
 * is not a language code, or is unsupported and unsupported codes are refused.
 */
function collectCodes(
  value: string,
  rules: TranslationRules,
  codes: string[],
): TranslationDecision | undefined {
  const { parameter, table } = rules;
  for (let start = 0; start <= value.length;) {
    let end = value.indexOf(",", start);
    if (end < 0) end = value.length;
    const next = end + 1;
    // Only spaces and tabs are trimmed: a CR, LF or NUL leaves the code malformed.
    while (start < end && isOws(value.charCodeAt(start))) start++;
    while (end > start && isOws(value.charCodeAt(end - 1))) end--;
    if (start < end) {
      if (!isLanguageRange(value, start, end)) {
        return refused(`${parameter}: ${named(value, start, end)} is not a language code`);
      }
      const found = lookupRange(value, start, end, table);
      if (found >= 0) {
        const tag = table.supported[found] as string;
        if (!codes.includes(tag)) codes.push(tag);
      } else if (!rules.dropUnsupported) {
        return refused(
          `${parameter}: ${named(value, start, end)} is not a supported language ` +
            `(supported: ${table.supported.join(", ")})`,
        );
      }
    }
    start = next;
  }
  return undefined;
}

// The one pair that stands for every occurrence, the codes capped at `max`. Concatenated rather
// than joined: Array#join's set-up costs more than the few codes it joins.
function canonicalPair(codes: string[], rules: TranslationRules): string {
  const { parameter } = rules;
  if (codes.length > rules.max) codes.length = rules.max;
  const separator = rules.forwardAs === "comma" ? "," : `&${parameter}=`;
  let pair = `${parameter}=${codes[0] as string}`;
  for (let i = 1; i < codes.length; i++) pair += separator + (codes[i] as string);
  return pair;
}

function refused(message: string): TranslationDecision {
  return { kind: "refused", message };
}

// Names are decoded leniently, as qs and most frameworks do, so that no spelling of the
// parameter (`translation%5Flanguage`, `translation_language%5B%5D`) slips past.
function decodeName(raw: string): string {
  if (!raw.includes("%") && !raw.includes("+")) return raw;
  return raw.replaceAll("+", " ").replace(ESCAPE, (_, hex: string) => {
    const code = Number.parseInt(hex, 16);
    return code < 0x80 ? String.fromCharCode(code) : `%${hex}`;
  });
}

// RFC 4647 §2.1: 1*8ALPHA *("-" 1*8alphanum), `_` read as `-` as for Accept-Language; no "*".
function isLanguageRange(text: string, start: number, end: number): boolean {
  let subtag = 0;
  let first = true;
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    const lower = code | 0x20;
    if ((lower >= 0x61 && lower <= 0x7a) || (!first && code >= 0x30 && code <= 0x39)) {
      if (++subtag > 8) return false;
    } else if ((code === 0x2d || code === 0x5f) && subtag > 0) {
      subtag = 0;
      first = false;
    } else {
      return false;
    }
  }
  return subtag > 0;
}

function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

// The code as a JSON string, shortened: the message is readable and bounded.
function named(text: string, start: number, end: number): string {
  const code = text.slice(start, Math.min(end, start + NAMED_LENGTH));
  return JSON.stringify(end - start > NAMED_LENGTH ? `${code}...` : code);
}
