/** The Cookie field (RFC 6265 §5.4): `name=value` pairs, separated by ";". */

/** One cookie's values in a Cookie field, and the field without it. */
export interface CookieTaken {
  /**
   * Every value sent under the name, in order, without the quotes RFC 6265 §4.1.1 allows; an
   * empty one (a page clears a cookie by emptying it) is none.
   */
  readonly values: readonly string[];
  /** The other cookies, as the field had them; undefined when none is left. */
  readonly rest: string | undefined;
}

const NONE: CookieTaken = Object.freeze({ values: Object.freeze([]), rest: undefined });

function unquoted(value: string): string {
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"')
    ? value.slice(1, -1)
    : value;
}

/**
 * Takes the cookie `name` out of a Cookie field (Node joins several Cookie lines with "; ").
 * Names are compared exactly, as browsers send them back.
 */
export function takeCookie(field: string | undefined, name: string): CookieTaken {
  if (field === undefined) return NONE;
  if (!field.includes(name)) return { values: [], rest: field };
  const values: string[] = [];
  const others: string[] = [];
  for (const pair of field.split(";")) {
    const trimmed = pair.trim();
    if (trimmed === "") continue;
    const equals = trimmed.indexOf("=");
    const own = equals !== -1 && trimmed.slice(0, equals).trim() === name;
    if (!own) others.push(trimmed);
    else {
      const value = unquoted(trimmed.slice(equals + 1).trim());
      if (value !== "") values.push(value);
    }
  }
  return { values, rest: others.length === 0 ? undefined : others.join("; ") };
}
