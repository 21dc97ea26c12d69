/** Reads the manual: README.md and the chapters in docs/, by file and by section. */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** README.md and every chapter under docs/, as paths from the repository's root. */
export function manualFiles(): string[] {
  const chapters = readdirSync("docs")
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => join("docs", name));
  return ["README.md", ...chapters];
}

/** The text of a file of the manual, such as `docs/errors.md`. */
export function readManual(path: string): string {
  return readFileSync(path, "utf8");
}

/** A Markdown heading outside code blocks: its level (1 to 6), text and line index. */
export interface Heading {
  level: number;
  text: string;
  line: number;
}

/** Every heading of `markdown`, skipping fenced code blocks (a `# comment` in a sh block is none). */
export function headings(markdown: string): Heading[] {
  const found: Heading[] = [];
  let fence: string | undefined;
  markdown.split("\n").forEach((line, index) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === undefined) fence = marker[0] as string;
      else if (marker[0] === fence) fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    const heading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      found.push({ level: (heading[1] as string).length, text: heading[2] as string, line: index });
    }
  });
  return found;
}

/**
 * The body of the section whose heading reads `title` (any level): the lines after the heading up
 * to the next heading of the same level or higher, or the end of the file. "" when there is none.
 */
export function section(markdown: string, title: string): string {
  const all = headings(markdown);
  const at = all.findIndex((heading) => heading.text === title);
  if (at === -1) return "";
  const start = all[at] as Heading;
  const end = all.slice(at + 1).find((heading) => heading.level <= start.level);
  return markdown
    .split("\n")
    .slice(start.line + 1, end?.line)
    .join("\n");
}

/**
 * The anchor GitHub gives a heading: its text as rendered (no code marks, a link's text), lower
 * case, every character but letters, digits, spaces, `-` and `_` removed, spaces turned into `-`.
 */
export function slug(text: string): string {
  return text
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, "")
    .replace(/ /g, "-");
}

/** Every anchor of `markdown`'s headings; a repeated one gets `-1`, `-2`, ... as GitHub numbers it. */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const heading of headings(markdown)) {
    const base = slug(heading.text);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

/** A fenced code block of the manual. */
export interface FencedBlock {
  /** The info string after the opening fence: `sh`, `yaml`, or "" for none. */
  readonly info: string;
  /** The lines between the fences, each ending with "\n". */
  readonly text: string;
  /**
   * The text of an HTML comment on the line before the block, or with one blank line between
   * (`<!-- test: output -->` gives `test: output`): a note for whoever runs the block, which a
   * reader of the rendered page does not see. Undefined when there is none.
   */
  readonly note: string | undefined;
}

function noteBefore(lines: readonly string[], fence: number): string | undefined {
  let index = fence - 1;
  if (lines[index]?.trim() === "") index--;
  return /^<!--\s*(.*?)\s*-->$/.exec(lines[index]?.trim() ?? "")?.[1];
}

/** Every fenced code block of `markdown`, in order. */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split("\n");
  const blocks: FencedBlock[] = [];
  let open: { marker: string; info: string; from: number; note: string | undefined } | undefined;
  lines.forEach((line, index) => {
    const fence = /^ {0,3}(`{3,}|~{3,})\s*(.*)$/.exec(line);
    if (fence === null) return;
    const [, marker = "", info = ""] = fence;
    if (open === undefined) {
      open = { marker, info: info.trim(), from: index + 1, note: noteBefore(lines, index) };
    } else if (marker.startsWith(open.marker) && info.trim() === "") {
      const text = lines.slice(open.from, index).map((text) => `${text}\n`);
      blocks.push({ info: open.info, text: text.join(""), note: open.note });
      open = undefined;
    }
  });
  return blocks;
}
