/** Counting a field's lines in the raw header list, which Node's merged `headers` hides. */

/**
 * How many field lines named `lowerName` the request carried (Node keeps only the first Host and
 * Authorization in `req.headers`; RFC 9110 §5.3: neither is a list field).
 */
export function fieldLines(raw: readonly string[], lowerName: string): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) count++;
  }
  return count;
}
