/**
 * `npm run bench`: runs the scenarios of bench/registry.ts that were asked (all of them by
 * default) in the registry's order. The side-by-side ones load the upstream, bare http-proxy-3
 * forwarders and gatehouse, each in its own process, alike with autocannon (also in its own
 * process) and report requests/s, latency and each proxy's CPU time per request, and gatehouse's
 * ratio to the baseline; the standalone ones report their own figures. Everything goes to the
 * terminal and to one results file, bench/RESULTS.md by default. Exits non-zero only when
 * something crashes, never for a missed goal.
 */
import { execFileSync } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { cpus } from "node:os";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { processCpuNs } from "./cpu.js";
import { choosePinning, type Pinning } from "./pin.js";
import { runLoad, type LoadOptions, type LoadResult } from "./load.js";
import type { Served } from "./processes.js";
import { SCENARIOS, type Entry, type SideBySide } from "./registry.js";
import {
  consoleTable,
  resultsMarkdown,
  verdict,
  cpuRatio,
  type Run,
  type ScenarioRuns,
  type Section,
} from "./report.js";
import {
  assertAnswered,
  servedIn,
  turns,
  type Scenario,
  type Skipped,
  type Target,
} from "./scenarios.js";
import { openShared, type Shared } from "./shared.js";

const DEFAULT_RESULTS = fileURLToPath(new URL("../../bench/RESULTS.md", import.meta.url));

const NAME_WIDTH = Math.max(...SCENARIOS.map((entry) => entry.name.length));
const KIND_WIDTH = Math.max(...SCENARIOS.map((entry) => kindText(entry).length));

const USAGE = `usage: npm run bench -- [options]
  --duration SEC      length of each measured run (default 5)
  --warmup SEC        unmeasured load per side-by-side scenario, all of them before any is
                      measured (default 10)
  --rounds N          paired runs per side-by-side scenario (default 8)
  --connections N     concurrent connections per target (default 32)
  --rate N            requests/s per target in the paired runs (default: as fast as answered)
  --scenario NAME     run only this scenario; repeatable (default: all, as listed below)
  --cpu-prof DIR      write V8 CPU profiles of the proxies to DIR
  --results FILE      where to write the Markdown results (default bench/RESULTS.md; - for none)
  --no-pin            do not pin the proxies and the rest to separate cores with taskset

scenarios, in the order they run; a side-by-side one is measured in paired rounds against the
goal shown for gatehouse's CPU ratio, a standalone one reports figures of its own:
${SCENARIOS.map(scenarioLine).join("\n")}
`;

function goalText(entry: SideBySide): string {
  return `≤ ${entry.goal.toFixed(2)}× ${entry.versus}`;
}

function kindText(entry: Entry): string {
  return entry.kind === "side-by-side" ? goalText(entry) : "standalone";
}

function scenarioLine(entry: Entry): string {
  return `  ${entry.name.padEnd(NAME_WIDTH)}  ${kindText(entry).padEnd(KIND_WIDTH)}  ${entry.description}`;
}

interface Settings {
  readonly load: LoadOptions;
  readonly warmupS: number;
  readonly rounds: number;
  readonly rate: number | undefined;
  /** The asked scenarios, in the registry's order. */
  readonly scenarios: readonly Entry[];
  readonly cpuProf: string | undefined;
  readonly results: string | undefined;
  readonly pinning: Pinning | null;
}

function positive(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new UsageError(`--${name} must be a whole number ≥ 1`);
  return value;
}

class UsageError extends Error {}

function parseSettings(argv: string[]): Settings | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: "string" },
      warmup: { type: "string" },
      rounds: { type: "string" },
      connections: { type: "string" },
      rate: { type: "string" },
      scenario: { type: "string", multiple: true },
      "cpu-prof": { type: "string" },
      results: { type: "string" },
      "no-pin": { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help === true) return undefined;
  const asked = values.scenario ?? SCENARIOS.map((entry) => entry.name);
  for (const name of asked) {
    if (!SCENARIOS.some((entry) => entry.name === name)) {
      throw new UsageError(`unknown scenario ${JSON.stringify(name)}`);
    }
  }
  const scenarios = SCENARIOS.filter((entry) => asked.includes(entry.name));
  const pinning = values["no-pin"] === true ? null : choosePinning();
  return {
    load: {
      durationS: positive("duration", values.duration, 5),
      connections: positive("connections", values.connections, 32),
      rate: undefined,
      cores: pinning?.others ?? null,
    },
    warmupS: positive("warmup", values.warmup, 10),
    rounds: positive("rounds", values.rounds, 8),
    rate: values.rate === undefined ? undefined : positive("rate", values.rate, 0),
    scenarios,
    cpuProf: values["cpu-prof"] === undefined ? undefined : resolve(values["cpu-prof"]),
    results: values.results === "-" ? undefined : resolve(values.results ?? DEFAULT_RESULTS),
    pinning,
  };
}

/** Loads every target at once and returns each one's figures and CPU time per response. */
async function measureTogether(
  targets: ReadonlyArray<{ target: Target; served: Served }>,
  load: LoadOptions,
): Promise<Run[]> {
  for (const { served } of targets) served.assertAlive();
  const before = targets.map(({ served }) => processCpuNs(served.pid));
  const results: LoadResult[] = await Promise.all(
    targets.map(({ target, served }) =>
      runLoad(served.url + target.path, target.headers, load, undefined, target.bound?.keysFile),
    ),
  );
  return targets.map(({ target, served }, i) => {
    served.assertAlive();
    const result = results[i] as LoadResult;
    if (result.completed === 0) throw new Error(`${target.label} answered no request`);
    const cpuNs = processCpuNs(served.pid) - (before[i] as number);
    return { ...result, cpuUsPerRequest: cpuNs / 1000 / result.completed };
  });
}

function describeRun(target: Target, run: Run): string {
  const faults = run.non2xx + run.errors > 0 ? `, ${run.non2xx} non-2xx, ${run.errors} errors` : "";
  return `${target.label}: ${run.rps.toFixed(0)} req/s, p99 ${run.p99} ms, ${run.cpuUsPerRequest.toFixed(1)} µs/req${faults}`;
}

// The targets of a scenario in round `round`, each with the process serving it then.
function pair(scenario: Scenario, round: number): Array<{ target: Target; served: Served }> {
  return [scenario.baseline, scenario.candidate].map((target) => ({
    target,
    served: servedIn(target, round),
  }));
}

/**
 * Loads every target of every scenario, each process in each of its turns, before anything is
 * measured: the JIT compiles for the whole mix of requests, as it would in service, and no
 * scenario's figures depend on which scenarios ran before it. Both gatehouse processes serve
 * every scenario, so they have the same past.
 */
async function warmUp(scenarios: readonly Scenario[], settings: Settings): Promise<void> {
  for (const scenario of scenarios) {
    process.stderr.write(`${scenario.name}: warming up\n`);
    const durationS = Math.ceil(settings.warmupS / turns(scenario));
    for (let turn = 0; turn < turns(scenario); turn++) {
      await measureTogether(pair(scenario, turn), { ...settings.load, durationS });
    }
  }
}

/**
 * One scenario: each target alone, for its requests/s and latency, then the paired rounds: both
 * targets loaded at once on their shared core, so that the machine's drifts and the shared
 * upstream weigh on both alike, each round yielding one CPU ratio.
 */
async function runScenario(scenario: Scenario, settings: Settings): Promise<ScenarioRuns> {
  const { load } = settings;
  const say = (text: string) => process.stderr.write(`${scenario.name}: ${text}\n`);
  const [baselineAlone] = await measureTogether(pair(scenario, 0).slice(0, 1), load);
  const [candidateAlone] = await measureTogether(pair(scenario, 0).slice(1), load);
  const alone = { baseline: baselineAlone as Run, candidate: candidateAlone as Run };
  say(`alone: ${describeRun(scenario.baseline, alone.baseline)}`);
  say(`alone: ${describeRun(scenario.candidate, alone.candidate)}`);
  const runs: ScenarioRuns = { scenario, alone, baseline: [], candidate: [] };
  const paired = { ...load, rate: settings.rate };
  // Whole swaps only: every process serves each of its targets equally often.
  const rounds = Math.ceil(settings.rounds / turns(scenario)) * turns(scenario);
  for (let round = 0; round < rounds; round++) {
    const [baseline, candidate] = await measureTogether(pair(scenario, round), paired);
    runs.baseline.push(baseline as Run);
    runs.candidate.push(candidate as Run);
    say(
      `round ${round + 1}/${rounds}: ` +
        `${describeRun(scenario.baseline, baseline as Run)}; ${describeRun(scenario.candidate, candidate as Run)}`,
    );
  }
  say(`ratio ${cpuRatio(runs).toFixed(3)} (${scenario.goalText}): ${verdict(runs)}`);
  return runs;
}

function commandLine(argv: readonly string[]): string {
  const args = argv.map((arg) => (/^[\w./=:-]+$/.test(arg) ? arg : JSON.stringify(arg))).join(" ");
  if (process.env.npm_lifecycle_event === "bench") {
    return args === "" ? "npm run bench" : `npm run bench -- ${args}`;
  }
  return `node dist/bench/run.js ${args}`.trimEnd();
}

function gitCommit(): string {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return "unknown";
  }
}

/**
 * The asked side-by-side scenarios: each prepared (starting what it needs) and checked to be
 * answered, all warmed up, then measured one after the other; the table is printed, and the
 * measurements some of them make after the paired rounds are reported.
 */
async function runSideBySide(
  entries: readonly SideBySide[],
  settings: Settings,
  shared: Shared,
  report: (section: Section) => void,
): Promise<{ results: ScenarioRuns[]; skipped: Skipped[] }> {
  const ready: Scenario[] = [];
  const skipped: Skipped[] = [];
  const after: Array<() => Promise<Section>> = [];
  for (const entry of entries) {
    const prepared = await entry.prepare(shared);
    if ("reason" in prepared) {
      process.stderr.write(`${entry.name}: skipped, ${prepared.reason}\n`);
      skipped.push({ name: entry.name, reason: prepared.reason });
      continue;
    }
    const { baseline, candidate } = prepared;
    // A misconfigured run fails here, with what was answered, rather than being measured.
    await assertAnswered(baseline);
    await assertAnswered(candidate);
    ready.push({
      name: entry.name,
      goal: entry.goal,
      goalText: goalText(entry),
      baseline,
      candidate,
    });
    if (prepared.after !== undefined) after.push(prepared.after);
  }
  await warmUp(ready, settings);
  const results: ScenarioRuns[] = [];
  for (const scenario of ready) results.push(await runScenario(scenario, settings));
  process.stdout.write(`\n${consoleTable(results, skipped)}\n`);
  for (const measure of after) report(await measure());
  return { results, skipped };
}

/** Writes the results file as the repository's formatter would, since it is committed. */
async function writeResults(path: string, markdown: string): Promise<void> {
  const prettier = await import("prettier");
  const options = (await prettier.resolveConfig(path)) ?? {};
  await writeFile(path, await prettier.format(markdown, { ...options, filepath: path }));
}

async function main(argv: string[]): Promise<number> {
  let settings: Settings | undefined;
  try {
    settings = parseSettings(argv);
  } catch (error) {
    process.stderr.write(`bench: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  if (settings === undefined) {
    process.stdout.write(USAGE);
    return 0;
  }
  const { load } = settings;
  const shared = await openShared({
    load,
    pinning: settings.pinning,
    profiling:
      settings.cpuProf === undefined
        ? []
        : ["--cpu-prof", "--cpu-prof-interval=200", `--cpu-prof-dir=${settings.cpuProf}`],
  });
  try {
    const sections: string[] = [];
    const report = (section: Section) => {
      process.stdout.write(`\n${section.text}\n`);
      sections.push(section.markdown);
    };
    const sideBySide = settings.scenarios.filter((entry) => entry.kind === "side-by-side");
    let table: { results: ScenarioRuns[]; skipped: Skipped[] } = { results: [], skipped: [] };
    // In the registry's order, the side-by-side scenarios together where the first of them is.
    for (const entry of settings.scenarios) {
      if (entry.kind === "standalone") report(await entry.measure(shared));
      else if (entry === sideBySide[0]) {
        table = await runSideBySide(sideBySide, settings, shared, report);
      }
    }
    if (settings.results !== undefined) {
      const markdown = resultsMarkdown(table.results, table.skipped, sections, {
        command: commandLine(argv),
        date: new Date().toISOString().slice(0, 16).replace("T", " ") + " UTC",
        node: process.version,
        cpu: `${cpus()[0]?.model ?? "unknown CPU"}, ${cpus().length} cores`,
        commit: gitCommit(),
        settings:
          `${load.connections} connections per target, ${load.durationS} s runs, ` +
          `${settings.rounds} paired rounds, ${settings.warmupS} s warm-up per scenario, ` +
          `${settings.rate === undefined ? "unpaced" : `paired runs at ${settings.rate} req/s`}, ` +
          (settings.pinning === null
            ? "not pinned"
            : `proxies pinned to CPU ${settings.pinning.proxies}, upstream and load to CPU ${settings.pinning.others}`),
      });
      await writeResults(settings.results, markdown);
      process.stdout.write(`\nwritten to ${settings.results}\n`);
    }
    return 0;
  } finally {
    await shared.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
