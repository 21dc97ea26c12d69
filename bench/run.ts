/**
 * `npm run bench`: the upstream, a bare http-proxy-3 forwarder and gatehouse, each in its own
 * process, driven alike by autocannon (also in its own process); reports requests/s, latency and
 * each proxy's CPU time per request, and gatehouse's ratio to the baseline, in a table and in
 * bench/RESULTS.md. Exits non-zero only when something crashes, never for a missed goal.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { runBigConfig } from "./big-config.js";
import { processCpuNs } from "./cpu.js";
import { withFootprint } from "./footprint.js";
import { isLimitScenario, prepareLimitScenarios } from "./limit-scenarios.js";
import { choosePinning, pin, type Pinning } from "./pin.js";
import { runLoad, type LoadOptions, type LoadResult } from "./load.js";
import { freePort, startBare, startGatehouse, startUpstream, type Served } from "./processes.js";
import {
  consoleTable,
  resultsMarkdown,
  verdict,
  cpuRatio,
  type Run,
  type ScenarioRuns,
} from "./report.js";
import {
  assertAnswered,
  benchConfig,
  newSecrets,
  newSigningKey,
  prepareScenarios,
  servedIn,
  turns,
  SCENARIO_NAMES,
  type Scenario,
  type Target,
} from "./scenarios.js";

const DEFAULT_RESULTS = fileURLToPath(new URL("../../bench/RESULTS.md", import.meta.url));

const USAGE = `usage: npm run bench -- [options]
  --duration SEC      length of each measured run (default 5)
  --warmup SEC        unmeasured load per scenario, all scenarios before any is measured
                      (default 10)
  --rounds N          paired runs per scenario (default 8)
  --connections N     concurrent connections per target (default 32)
  --rate N            requests/s per target in the paired runs (default: as fast as answered)
  --scenario NAME     run only this scenario; repeatable (${SCENARIO_NAMES.join(", ")})
  --cpu-prof DIR      write V8 CPU profiles of the proxies to DIR
  --results FILE      where to write the Markdown results (default bench/RESULTS.md; - for none)
  --no-pin            do not pin the proxies and the rest to separate cores with taskset
`;

interface Settings {
  readonly load: LoadOptions;
  readonly warmupS: number;
  readonly rounds: number;
  readonly rate: number | undefined;
  readonly scenarios: readonly string[];
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
  const scenarios = values.scenario ?? [...SCENARIO_NAMES];
  const pinning = values["no-pin"] === true ? null : choosePinning();
  for (const name of scenarios) {
    if (!(SCENARIO_NAMES as readonly string[]).includes(name)) {
      throw new UsageError(`unknown scenario ${JSON.stringify(name)}`);
    }
  }
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
    targets.map(({ target, served }) => runLoad(served.url + target.path, target.headers, load)),
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

async function main(all: string[]): Promise<number> {
  const argv = await runBigConfig(all);
  if (argv === undefined) return 0;
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
  const profiling =
    settings.cpuProf === undefined
      ? []
      : ["--cpu-prof", "--cpu-prof-interval=200", `--cpu-prof-dir=${settings.cpuProf}`];
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-bench-"));
  const secrets = newSecrets();
  const started: Served[] = [];
  try {
    const upstream = await startUpstream();
    started.push(upstream);
    // Two processes of each kind: in the paired rounds each gatehouse process is measured
    // against its own bare forwarder in turn, so that how fast one process happens to be (the
    // same build has differed by 10% from one start to the next) weighs on both kinds alike.
    const bares: Served[] = [];
    for (let i = 0; i < 2; i++) {
      const bare = await startBare(upstream.url, profiling);
      started.push(bare);
      bares.push(bare);
    }
    const keyFile = join(dir, "signing.pem");
    await writeFile(keyFile, newSigningKey());
    const gatehouses: Served[] = [];
    for (const name of ["gatehouse", "gatehouse twin"]) {
      const port = await freePort();
      const configPath = join(dir, `${name.replace(" ", "-")}.yaml`);
      await writeFile(configPath, benchConfig(upstream.url, port, keyFile));
      const served = await startGatehouse(
        name,
        configPath,
        port,
        { ...process.env, ...secrets.env },
        profiling,
      );
      started.push(served);
      gatehouses.push(served);
    }
    const [gatehouse, twin] = gatehouses as [Served, Served];
    if (settings.pinning !== null) {
      pin(upstream.pid, settings.pinning.others);
      for (const proxy of [...bares, gatehouse, twin]) pin(proxy.pid, settings.pinning.proxies);
    }

    const ready = await prepareScenarios(
      settings.scenarios.filter((name) => !isLimitScenario(name)),
      bares as [Served, Served],
      gatehouse,
      twin,
      secrets,
    );
    const limits = await prepareLimitScenarios(settings.scenarios, {
      upstream,
      bares: bares as [Served, Served],
      keyFile,
      dir,
      pinning: settings.pinning,
      load,
    });
    started.push(...limits.started);
    ready.push(...limits.ready);
    const { skipped } = limits;
    for (const skip of skipped) process.stderr.write(`${skip.name}: skipped, ${skip.reason}\n`);
    // A misconfigured run fails here, with what was answered, rather than being measured.
    for (const scenario of ready) {
      await assertAnswered(scenario.baseline);
      await assertAnswered(scenario.candidate);
    }
    await warmUp(ready, settings);
    const results: ScenarioRuns[] = [];
    for (const scenario of ready) results.push(await runScenario(scenario, settings));

    const limitsNotes = await limits.measure();
    process.stdout.write(`\n${consoleTable(results, skipped)}\n\n${limitsNotes}`);
    if (settings.results !== undefined) {
      const markdown = resultsMarkdown(results, skipped, {
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
      // The file is committed: write it as the repository's formatter would, so checks pass.
      const prettier = await import("prettier");
      const options = (await prettier.resolveConfig(settings.results)) ?? {};
      await writeFile(
        settings.results,
        await prettier.format(markdown + limitsNotes, { ...options, filepath: settings.results }),
      );
      process.stdout.write(`\nwritten to ${settings.results}\n`);
    }
    return 0;
  } finally {
    for (const served of started.reverse()) await served.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

withFootprint(main, process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
