/**
 * A JOSE header's `typ` read as the media type it names (RFC 7515 §4.1.9): compared without
 * regard to case, and with `application/` understood before a value that has no `/` of its own
 * (`at+jwt` is `application/at+jwt`).
 */

/** `typ` as a lower-cased full media type; undefined when it is not a string. */
export function mediaTypeOf(typ: unknown): string | undefined {
  if (typeof typ !== "string") return undefined;
  const lower = typ.toLowerCase();
  return lower.includes("/") ? lower : `application/${lower}`;
}

/** The media types `typs` name, as `mediaTypeOf` reads them, to look a header's `typ` up in. */
export function mediaTypes(...typs: string[]): ReadonlySet<string> {
  return new Set(typs.map((typ) => mediaTypeOf(typ) as string));
}
