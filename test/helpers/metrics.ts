/** Reading gatehouse's /metrics as Prometheus scrapes it: the text, or one sample's value. */
import type { TestGatehouse } from "./gatehouse.js";

/** A test gatehouse, or the base URL of an admin listener (a gatehouse run as a process). */
export type Scraped = TestGatehouse | string;

/** The exposition text served at /metrics. */
export async function scrape(from: Scraped): Promise<string> {
  const base = typeof from === "string" ? from : from.adminUrl;
  return (await fetch(`${base}/metrics`)).text();
}

/** The labels of a sample line, as written (`a="x",b="y"`), by name. */
function labelsOf(text: string): Map<string, string> {
  const labels = new Map<string, string>();
  for (const [, name, value] of text.matchAll(/([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"/g)) {
    labels.set(
      name as string,
      (value as string).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c)),
    );
  }
  return labels;
}

/**
 * The value of the first sample named `name` whose labels include `labels`, in exposition
 * `text`; NaN when there is none.
 */
export function sampleValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number {
  for (const line of text.split("\n")) {
    const sample = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (sample === null || sample[1] !== name) continue;
    const own = labelsOf(sample[2] ?? "");
    if (Object.entries(labels).every(([key, value]) => own.get(key) === value)) {
      return Number(sample[3]);
    }
  }
  return Number.NaN;
}

/** The value of one sample, scraped now (see sampleValue). */
export async function metric(
  from: Scraped,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  return sampleValue(await scrape(from), name, labels);
}
