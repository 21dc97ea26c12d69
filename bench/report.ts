/**
 * Turns measured runs into medians, a console table and bench/RESULTS.md, and gives the sections
 * that measurements of their own add to it their shape.
 */
import type { LoadResult } from "./load.js";
import { turns, type Scenario, type Skipped } from "./scenarios.js";

/** What a measurement of its own reports: text for the terminal, a section for RESULTS.md. */
export interface Section {
  readonly text: string;
  readonly markdown: string;
}

/** A section that the terminal shows as it is written in Markdown. */
export function markdownSection(markdown: string): Section {
  return { text: markdown, markdown };
}

/**
 * A section of named figures headed `title`: aligned lines for the terminal, a table in Markdown.
 */
export function figuresSection(
  title: string,
  figures: ReadonlyArray<readonly [string, string]>,
): Section {
  const width = Math.max(...figures.map(([name]) => name.length));
  return {
    text: [title, ...figures.map(([name, value]) => `${name.padEnd(width)}  ${value}`)].join("\n"),
    markdown: [
      `## ${title}`,
      "",
      "| measure | value |",
      "| --- | --- |",
      ...figures.map(([name, value]) => `| ${name} | ${value} |`),
      "",
    ].join("\n"),
  };
}

/** One measured run of one target. */
export interface Run extends LoadResult {
  /** The target process's CPU time during the run divided by the responses received. */
  readonly cpuUsPerRequest: number;
}

/** A scenario's runs: each target alone, then the paired runs round by round. */
export interface ScenarioRuns {
  readonly scenario: Scenario;
  readonly alone: { readonly baseline: Run; readonly candidate: Run };
  readonly baseline: Run[];
  readonly candidate: Run[];
}

/** One line of the results table. */
interface Row {
  readonly scenario: string;
  readonly target: string;
  readonly rps: string;
  readonly p50: string;
  readonly p99: string;
  readonly paired: string;
  readonly cpu: string;
  readonly ratio: string;
  readonly goal: string;
  readonly result: string;
}

const HEADINGS: Row = {
  scenario: "scenario",
  target: "target",
  rps: "req/s alone",
  p50: "p50 ms",
  p99: "p99 ms",
  paired: "req/s paired",
  cpu: "CPU µs/req",
  ratio: "ratio",
  goal: "goal",
  result: "result",
};
const RIGHT_ALIGNED = new Set<keyof Row>(["rps", "p50", "p99", "paired", "cpu", "ratio"]);

/** The median of a non-empty list. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/**
 * The candidate's CPU per request over the baseline's. Each round's ratio compares two runs made
 * next to each other under the same machine conditions. The targets take turns on their
 * processes round by round: the rounds of each whole turn are combined by their geometric mean,
 * which averages each process's own speed over its kind (and cancels it where two processes swap
 * kinds, as in `language`), and the median of those is the ratio.
 */
export function cpuRatio(runs: ScenarioRuns): number {
  const size = turns(runs.scenario);
  const swaps: number[] = [];
  for (let start = 0; start + size <= runs.candidate.length; start += size) {
    let logSum = 0;
    for (let round = start; round < start + size; round++) {
      const candidate = (runs.candidate[round] as Run).cpuUsPerRequest;
      logSum += Math.log(candidate / (runs.baseline[round] as Run).cpuUsPerRequest);
    }
    swaps.push(Math.exp(logSum / size));
  }
  return median(swaps);
}

function faults(runs: readonly Run[]): number {
  return runs.reduce((sum, run) => sum + run.non2xx + run.errors, 0);
}

function targetRow(scenario: string, target: string, alone: Run, paired: readonly Run[]): Row {
  return {
    scenario,
    target,
    rps: alone.rps.toFixed(0),
    p50: alone.p50.toFixed(2),
    p99: alone.p99.toFixed(2),
    paired: median(paired.map((r) => r.rps)).toFixed(0),
    cpu: median(paired.map((r) => r.cpuUsPerRequest)).toFixed(1),
    ratio: "",
    goal: "",
    result: "",
  };
}

/** The verdict for a scenario: pass, fail, or invalid when a run saw errors or non-2xx answers. */
export function verdict(runs: ScenarioRuns): string {
  const bad = faults([
    ...runs.baseline,
    ...runs.candidate,
    runs.alone.baseline,
    runs.alone.candidate,
  ]);
  if (bad > 0) return `invalid (${bad} errors or non-2xx)`;
  return cpuRatio(runs) <= runs.scenario.goal ? "pass" : "FAIL";
}

function rows(results: readonly ScenarioRuns[], skipped: readonly Skipped[]): Row[] {
  const out: Row[] = [];
  for (const runs of results) {
    const { scenario } = runs;
    out.push(targetRow(scenario.name, scenario.baseline.label, runs.alone.baseline, runs.baseline));
    out.push({
      ...targetRow("", scenario.candidate.label, runs.alone.candidate, runs.candidate),
      ratio: `${cpuRatio(runs).toFixed(3)}×`,
      goal: scenario.goalText,
      result: verdict(runs),
    });
  }
  for (const skip of skipped) {
    out.push({
      ...HEADINGS,
      scenario: skip.name,
      target: "skipped",
      rps: "",
      p50: "",
      p99: "",
      paired: "",
      cpu: "",
      ratio: "",
      goal: "",
      result: "skipped",
    });
  }
  return out;
}

/** A fixed-width table for the terminal. */
export function consoleTable(
  results: readonly ScenarioRuns[],
  skipped: readonly Skipped[],
): string {
  const all = [HEADINGS, ...rows(results, skipped)];
  const keys = Object.keys(HEADINGS) as Array<keyof Row>;
  const widths = keys.map((key) => Math.max(...all.map((row) => row[key].length)));
  const line = (row: Row) =>
    keys
      .map((key, i) =>
        RIGHT_ALIGNED.has(key)
          ? row[key].padStart(widths[i] as number)
          : row[key].padEnd(widths[i] as number),
      )
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  const notes = skipped.map((skip) => `${skip.name}: skipped, ${skip.reason}`);
  return [
    line(HEADINGS),
    rule,
    ...all.slice(1).map(line),
    ...(notes.length ? ["", ...notes] : []),
  ].join("\n");
}

/** What RESULTS.md states besides the table, so the figures can be reproduced. */
export interface RunInfo {
  readonly command: string;
  readonly date: string;
  readonly node: string;
  readonly cpu: string;
  readonly commit: string;
  readonly settings: string;
}

/**
 * The Markdown of bench/RESULTS.md: how the run was made, the side-by-side scenarios' table and
 * how to read it (when any was asked), then `sections`, the Markdown of the other measurements.
 */
export function resultsMarkdown(
  results: readonly ScenarioRuns[],
  skipped: readonly Skipped[],
  sections: readonly string[],
  info: RunInfo,
): string {
  return [...runHeader(info), ...sideBySide(results, skipped), ...sections].join("\n");
}

function runHeader(info: RunInfo): string[] {
  return [
    "# Benchmark results",
    "",
    "The latest figures of the benchmark in `bench/`, written by the run itself. Reproduce with:",
    "",
    "```sh",
    info.command,
    "```",
    "",
    `- Date: ${info.date}`,
    `- Commit: ${info.commit}`,
    `- Node.js ${info.node}, ${info.cpu}`,
    `- ${info.settings}`,
    "",
  ];
}

function sideBySide(results: readonly ScenarioRuns[], skipped: readonly Skipped[]): string[] {
  if (results.length === 0 && skipped.length === 0) return [];
  const keys = Object.keys(HEADINGS) as Array<keyof Row>;
  const line = (row: Row) => `| ${keys.map((key) => row[key]).join(" | ")} |`;
  const align = `|${keys.map((key) => (RIGHT_ALIGNED.has(key) ? " ---: " : " --- ")).join("|")}|`;
  return [
    line(HEADINGS),
    align,
    ...rows(results, skipped).map(line),
    "",
    ...skipped.map((skip) => `- \`${skip.name}\` was skipped: ${skip.reason}`),
    ...(skipped.length ? [""] : []),
    "How to read it:",
    "",
    "- The upstream, two bare http-proxy-3 forwarders, two gatehouse processes (started through",
    "  their command line, access log at `info` to /dev/null; `trusted-proxies` and `redis` start",
    "  two of their own, configured for them) and one load generator (autocannon) per target each",
    "  run in their own process. Where taskset exists, the proxies share the last core and the",
    "  upstream and the load generators run on the others.",
    "- Warm-up: every scenario's requests, each to every process that serves them, before any",
    "  figure is taken, so the JIT has compiled for the whole mix, as in service, and the two",
    "  gatehouse processes of a pair have the same past.",
    "- req/s alone, p50, p99: each target alone, as fast as it answers.",
    "- req/s paired, CPU µs/req: in a paired run both targets are loaded at the same time, each",
    "  by its own load generator, as fast as they answer, on the core they share, so a drift of",
    "  the machine's speed and the shared upstream weigh on both alike. CPU µs/req is the target",
    "  process's CPU time (all threads, from `/proc/PID/task/*/schedstat`) during the run divided",
    "  by the responses it gave; both columns are medians over the paired runs. Against the bare",
    "  forwarder, each gatehouse process is paired with its own bare process, the two pairs taking",
    "  turns round by round; where one program receives two kinds of request (`language`), each",
    "  kind goes to its own gatehouse process and the two processes swap kinds every round.",
    "- ratio: the candidate's CPU µs/req over the baseline's (the row above it), round by round,",
    "  then the median; `goal` bounds it. The two rounds of each turn are first combined by their",
    "  geometric mean, which averages over two processes of each kind (the same build has differed",
    "  by 10% from one start to the next). A missed goal is reported, not an error.",
    "",
  ];
}
