/**
 * The member names of a JSON object as written, repeats included: JSON.parse keeps the last of
 * repeated names silently, and RFC 8259 §4 leaves what they mean to each reader.
 */

/** The index of the quote that closes the string opening at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
  return i;
}

/** The names of the top-level object's members in order, for `text` that JSON.parse accepted. */
export function topLevelNames(text: string): string[] {
  const names: string[] = [];
  let depth = 0;
  let nameNext = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = stringEnd(text, i);
      if (nameNext) names.push(JSON.parse(text.slice(i, end + 1)) as string);
      nameNext = false;
      i = end;
    } else if (c === "{" || c === "[") {
      depth++;
      nameNext = false;
    } else if (c === "}" || c === "]") {
      depth--;
    } else if (c === "," && depth === 1) {
      nameNext = true;
    }
    if (c === "{" && depth === 1) nameNext = true;
  }
  return names;
}
