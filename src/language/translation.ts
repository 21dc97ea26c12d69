/**
 * The translation parameter (SPEC §4.3) rewritten over the raw query string: every occurrence
 * merged into one canonical value that stands where the parameter first appeared; every other
 * byte of the query is forwarded as it came.
 */
import { lookupRange, type TranslationRules } from "./table.js";

/** What canonicalising a query decided. */
export type TranslationDecision =
  | { readonly kind: "absent" }
  | { readonly kind: "canonical"; readonly query: string | null; readonly codes: readonly string[] }
  | { readonly kind: "refused"; readonly message: string };

const ABSENT: TranslationDecision = Object.freeze({ kind: "absent" });

// RFC 4647 §2.1 language-range without "*", `_` read as `-` as for Accept-Language.
const LANGUAGE_TAG = /^[A-Za-z]{1,8}(?:[-_][A-Za-z0-9]{1,8})*$/;
const ESCAPE = /%([0-9A-Fa-f]{2})/g;
const NAMED_LENGTH = 35;

/**
 * Canonicalises the translation parameter of `query` (raw, without `?`): decoded once, trimmed,
 * case-folded, reduced by RFC 4647 lookup, de-duplicated in first-seen order, capped at `max`.
 */
export function canonicaliseTranslation(
  query: string | null,
  rules: TranslationRules,
): TranslationDecision {
  const { parameter, table } = rules;
  // Fast path: the name can only be present written out or percent-encoded.
  if (query === null || (!query.includes(parameter) && !query.includes("%"))) return ABSENT;
  const kept: string[] = [];
  const codes: string[] = [];
  let at = -1;
  for (const part of query.split("&")) {
    const equals = part.indexOf("=");
    const rawName = equals < 0 ? part : part.slice(0, equals);
    const name = decodeName(rawName);
    if (name !== parameter) {
      // `p[]=` and `p[0]=` would become an array in qs-style parsers, past the `max` rule.
      if (name.startsWith(`${parameter}[`)) {
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
    const value = decodeValue(equals < 0 ? "" : part.slice(equals + 1));
    if (value === undefined) return refused(`${parameter} has a malformed percent-encoding`);
    for (const member of value.split(",")) {
      const code = trimOws(member);
      if (code === "") continue;
      if (!LANGUAGE_TAG.test(code))
        return refused(`${parameter}: ${named(code)} is not a language code`);
      const found = lookupRange(code, 0, code.length, table);
      if (found < 0) {
        if (rules.dropUnsupported) continue;
        return refused(
          `${parameter}: ${named(code)} is not a supported language (supported: ${table.supported.join(", ")})`,
        );
      }
      const tag = table.supported[found] as string;
      if (!codes.includes(tag)) codes.push(tag);
    }
  }
  if (at < 0) return ABSENT;
  if (codes.length > rules.max) codes.length = rules.max;
  if (codes.length === 0) kept.splice(at, 1);
  else if (rules.forwardAs === "comma") kept[at] = `${parameter}=${codes.join(",")}`;
  else kept[at] = codes.map((code) => `${parameter}=${code}`).join("&");
  return { kind: "canonical", query: kept.length === 0 ? null : kept.join("&"), codes };
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

// Values are decoded exactly once (RFC 3986 §2.4): `%252C` stays `%2C`, not a comma.
function decodeValue(raw: string): string | undefined {
  if (!raw.includes("%") && !raw.includes("+")) return raw;
  try {
    return decodeURIComponent(raw.replaceAll("+", " "));
  } catch {
    return undefined;
  }
}

// Only spaces and tabs are trimmed: a CR, LF or NUL makes the value malformed (BAD_INPUTS C23).
function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && isOws(text.charCodeAt(start))) start++;
  while (end > start && isOws(text.charCodeAt(end - 1))) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

function isOws(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

// The code as a JSON string, shortened: the message is readable and bounded.
function named(code: string): string {
  return JSON.stringify(code.length > NAMED_LENGTH ? `${code.slice(0, NAMED_LENGTH)}...` : code);
}
