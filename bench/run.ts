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
import { processCpuNs } from "./cpu.js";
import { choosePinning, pin, type Pinning } from "./pin.js";
import { runLoad, type LoadOptions } from "./load.js";
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
  benchConfig,
  newSecrets,
  prepareScenarios,
  SCENARIO_NAMES,
  type Target,
} from "./scenarios.js";

const DEFAULT_RESULTS = fileURLToPath(new URL("../../bench/RESULTS.md", import.meta.url));

const USAGE = `usage: npm run bench -- [options]
  --duration SEC      length of each measured run (default 8)
  --warmup SEC        unmeasured load on each target before a scenario's rounds (default 2)
  --rounds N          measured runs per target, alternating targets (default 3)
  --connections N     concurrent connections (default 32)
  --rate N            fixed requests/s over all connections (default: as fast as answered)
  --scenario NAME     run only this scenario; repeatable (${SCENARIO_NAMES.join(", ")})
  --cpu-prof DIR      write V8 CPU profiles of gatehouse and the bare forwarder to DIR
  --results FILE      where to write the Markdown results (default bench/RESULTS.md; - for none)
  --no-pin            do not pin the proxies and the rest to separate cores with taskset
`;

interface Settings {
  readonly load: LoadOptions;
  readonly warmupS: number;
  readonly rounds: number;
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
      durationS: positive("duration", values.duration, 8),
      connections: positive("connections", values.connections, 32),
      rate: values.rate === undefined ? undefined : positive("rate", values.rate, 0),
      cores: pinning?.others ?? null,
    },
    warmupS: positive("warmup", values.warmup, 2),
    rounds: positive("rounds", values.rounds, 3),
    scenarios,
    cpuProf: values["cpu-prof"] === undefined ? undefined : resolve(values["cpu-prof"]),
    results: values.results === "-" ? undefined : resolve(values.results ?? DEFAULT_RESULTS),
    pinning,
  };
}

async function measure(target: Target, load: LoadOptions): Promise<Run> {
  target.served.assertAlive();
  const before = processCpuNs(target.served.pid);
  const result = await runLoad(target.served.url + target.path, target.headers, load);
  const after = processCpuNs(target.served.pid);
  target.served.assertAlive();
  if (result.completed === 0) throw new Error(`${target.label} answered no request`);
  return { ...result, cpuUsPerRequest: (after - before) / 1000 / result.completed };
}

function describeRun(target: Target, run: Run): string {
  const faults = run.non2xx + run.errors > 0 ? `, ${run.non2xx} non-2xx, ${run.errors} errors` : "";
  return `${target.label}: ${run.rps.toFixed(0)} req/s, p99 ${run.p99} ms, ${run.cpuUsPerRequest.toFixed(1)} µs/req${faults}`;
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
  const profiling =
    settings.cpuProf === undefined
      ? []
      : ["--cpu-prof", "--cpu-prof-interval=200", `--cpu-prof-dir=${settings.cpuProf}`];
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-bench-"));
  const started: Served[] = [];
  try {
    const upstream = await startUpstream();
    started.push(upstream);
    const bare = await startBare(upstream.url, profiling);
    started.push(bare);
    const port = await freePort();
    const configPath = join(dir, "proxy.config.yaml");
    await writeFile(configPath, benchConfig(upstream.url, port));
    const secrets = newSecrets();
    const gatehouse = await startGatehouse(
      configPath,
      port,
      { ...process.env, ...secrets.env },
      profiling,
    );
    started.push(gatehouse);
    if (settings.pinning !== null) {
      pin(upstream.pid, settings.pinning.others);
      pin(bare.pid, settings.pinning.proxies);
      pin(gatehouse.pid, settings.pinning.proxies);
    }

    const { ready, skipped } = await prepareScenarios(settings.scenarios, bare, gatehouse, secrets);
    for (const skip of skipped) process.stderr.write(`${skip.name}: skipped, ${skip.reason}\n`);
    const results: ScenarioRuns[] = [];
    for (const scenario of ready) {
      const runs: ScenarioRuns = { scenario, baseline: [], candidate: [] };
      const warmup = { ...load, durationS: settings.warmupS };
      process.stderr.write(`${scenario.name}: warming up\n`);
      await measure(scenario.baseline, warmup);
      await measure(scenario.candidate, warmup);
      for (let round = 0; round < settings.rounds; round++) {
        // ABBA order, so a drift in machine speed during a scenario weighs on both targets alike.
        const order =
          round % 2 === 0
            ? (["baseline", "candidate"] as const)
            : (["candidate", "baseline"] as const);
        for (const side of order) {
          const run = await measure(scenario[side], load);
          runs[side].push(run);
          process.stderr.write(
            `${scenario.name} round ${round + 1}/${settings.rounds}: ${describeRun(scenario[side], run)}\n`,
          );
        }
      }
      process.stderr.write(
        `${scenario.name}: ratio ${cpuRatio(runs).toFixed(3)} (${scenario.goalText}): ${verdict(runs)}\n`,
      );
      results.push(runs);
    }

    process.stdout.write(`\n${consoleTable(results, skipped)}\n`);
    if (settings.results !== undefined) {
      const markdown = resultsMarkdown(results, skipped, {
        command: commandLine(argv),
        date: new Date().toISOString().slice(0, 16).replace("T", " ") + " UTC",
        node: process.version,
        cpu: `${cpus()[0]?.model ?? "unknown CPU"}, ${cpus().length} cores`,
        commit: gitCommit(),
        settings:
          `${load.connections} connections, ${load.durationS} s runs, ${settings.rounds} rounds, ` +
          `${settings.warmupS} s warm-up, ${load.rate === undefined ? "unpaced" : `${load.rate} req/s`}, ` +
          (settings.pinning === null
            ? "not pinned"
            : `proxies pinned to CPU ${settings.pinning.proxies}, upstream and load to CPU ${settings.pinning.others}`),
      });
      // The file is committed: write it as the repository's formatter would, so checks pass.
      const prettier = await import("prettier");
      const options = (await prettier.resolveConfig(settings.results)) ?? {};
      await writeFile(
        settings.results,
        await prettier.format(markdown, { ...options, filepath: settings.results }),
      );
      process.stdout.write(`\nwritten to ${settings.results}\n`);
    }
    return 0;
  } finally {
    for (const served of started.reverse()) await served.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`bench: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
