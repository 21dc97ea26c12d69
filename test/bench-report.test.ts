import t from "tap";
import {
  consoleTable,
  cpuRatio,
  figuresSection,
  resultsMarkdown,
  verdict,
  type Run,
  type RunInfo,
} from "../bench/report.js";
import type { Served } from "../bench/processes.js";
import type { Scenario, Target } from "../bench/scenarios.js";

function served(name: string): Served {
  return { name, pid: 0, url: "", assertAlive() {}, stop: async () => {} };
}

function run(cpuUsPerRequest: number, non2xx = 0): Run {
  return { rps: 1000, p50: 1, p99: 2, completed: 5000, non2xx, errors: 0, cpuUsPerRequest };
}

function target(label: string, processes: Served[]): Target {
  return { label, served: processes, path: "/", headers: {} };
}

const one = served("gatehouse");
const twin = served("gatehouse twin");
const side: Scenario = {
  name: "forward",
  goal: 1.1,
  goalText: "≤ 1.10× bare",
  baseline: target("bare", [served("bare")]),
  candidate: target("gatehouse", [one]),
};
const swapped: Scenario = {
  name: "language",
  goal: 1.05,
  goalText: "≤ 1.05× without",
  baseline: target("without", [twin, one]),
  candidate: target("with", [one, twin]),
};

t.test("side by side: the median of the rounds' ratios", async (t) => {
  const runs = {
    scenario: side,
    alone: { baseline: run(50), candidate: run(55) },
    baseline: [50, 50, 50, 50, 50].map((cpu) => run(cpu)),
    candidate: [52, 60, 53, 51, 54].map((cpu) => run(cpu)),
  };
  t.equal(cpuRatio(runs).toFixed(3), "1.060");
  t.equal(verdict(runs), "pass");
});

t.test("swapped processes: one process's own speed cancels out", async (t) => {
  // `twin` costs 10% more than `one` whatever it serves; the requests with the feature cost 4%
  // more than those without. Rounds alternate: with on `one` against without on `twin`, then
  // the other way round.
  const r = 1.04;
  const k = 1.1;
  const baseline: Run[] = [];
  const candidate: Run[] = [];
  for (let swap = 0; swap < 4; swap++) {
    const drift = 1 + swap / 10; // the machine slows down between swaps: both sides alike
    baseline.push(run(50 * k * drift), run(50 * drift));
    candidate.push(run(50 * r * drift), run(50 * r * k * drift));
  }
  const runs = {
    scenario: swapped,
    alone: { baseline: run(50), candidate: run(52) },
    baseline,
    candidate,
  };
  t.equal(cpuRatio(runs).toFixed(4), "1.0400", "the ratio of the requests, not of the processes");
  t.equal(verdict(runs), "pass");
});

t.test("a run with errors or non-2xx answers is invalid, whatever its ratio", async (t) => {
  const runs = {
    scenario: side,
    alone: { baseline: run(50), candidate: run(50, 3) },
    baseline: [run(50)],
    candidate: [run(50)],
  };
  t.equal(verdict(runs), "invalid (3 errors or non-2xx)");
});

const info: RunInfo = {
  command: "npm run bench",
  date: "2026-11-24 00:00 UTC",
  node: "v20.0.0",
  cpu: "a CPU, 2 cores",
  commit: "abc1234",
  settings: "defaults",
};

t.test("the table and RESULTS.md carry the figures, the goal and the verdict", async (t) => {
  const runs = {
    scenario: side,
    alone: { baseline: run(50), candidate: run(60) },
    baseline: [run(50), run(50), run(50)],
    candidate: [run(60), run(60), run(60)],
  };
  const markdown = resultsMarkdown(
    [runs],
    [{ name: "redis", reason: "no redis-server" }],
    ["## keys\n\nthe keys section\n"],
    info,
  );
  t.match(markdown, /\| forward +\| bare +\|/);
  t.match(markdown, /\| 1\.200× \| ≤ 1\.10× bare +\| FAIL +\|/);
  t.match(markdown, /\| redis +\| skipped/);
  t.match(markdown, /- Commit: abc1234/);
  t.match(
    markdown,
    /How to read it:[^]*## keys\n\nthe keys section/,
    "the sections after the table",
  );
  t.match(
    consoleTable([runs], []),
    /gatehouse +1000 +1\.00 +2\.00 +1000 +60\.0 +1\.200× +≤ 1\.10× bare +FAIL/,
  );
});

t.test("a run of standalone measurements only: their sections, no table", async (t) => {
  const section = figuresSection("big-config", [
    ["10000 routes, ready from the start", "900 ms (1200 ms CPU)"],
    ["reload applied", "800 ms"],
  ]);
  t.equal(
    section.text,
    "big-config\n10000 routes, ready from the start  900 ms (1200 ms CPU)\n" +
      "reload applied                      800 ms",
  );
  const markdown = resultsMarkdown([], [], [section.markdown], info);
  t.match(markdown, /- defaults\n\n## big-config\n\n\| measure \| value \|/);
  t.match(markdown, /\| reload applied \| 800 ms \|/);
  t.notMatch(markdown, /How to read it|\| scenario \|/);
});
