/**
 * The `big-config` scenario: gatehouse started on a 10,000-route file, then reloaded. Reports
 * the time and CPU to ready, and the longest the event loop was held while the reload ran: how
 * long a reload holds requests in flight.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { startGatehouse } from "../src/server.js";
import { figuresSection, type Section } from "./report.js";

const ROUTES = 10_000;

function bigConfig(variant: string): string {
  const lines = [
    "listen: 127.0.0.1:0",
    "admin_listen: 127.0.0.1:0",
    "upstream:\n  url: http://127.0.0.1:9",
    "plans:\n  default:\n    rate_limit: { limit: 100, window: 1m }",
    "  anonymous:\n    rate_limit: { limit: 100, window: 1m }",
    "routes:",
  ];
  for (let i = 0; i < ROUTES; i++) {
    // A mix as a large API has: literal paths, one-segment wildcards and subtrees.
    const path =
      i % 10 === 0
        ? `/v1/${variant}${i}/*/items`
        : i % 10 === 1
          ? `/v1/${variant}${i}/**`
          : `/v1/${variant}${i}/items`;
    lines.push(
      `  - path: ${path}\n    methods: [GET, POST]\n    cost: ${1 + (i % 3)}\n    auth: ${i % 2 ? "none" : "bearer"}`,
    );
  }
  return lines.join("\n") + "\n";
}

/**
 * Starts gatehouse in this process (nothing else runs in it, so the event loop's pauses are
 * gatehouse's own), then reloads a changed file while watching the event loop.
 */
async function measure(dir: string): Promise<Section> {
  const configPath = join(dir, "big.yaml");
  await writeFile(configPath, bigConfig("a"));
  const log = pino({ level: "silent" });
  let cpu = process.cpuUsage();
  let started = performance.now();
  const gatehouse = await startGatehouse({ configPath, log, watch: false });
  try {
    const readyMs = performance.now() - started;
    const readyCpu = process.cpuUsage(cpu);
    await writeFile(configPath, bigConfig("b"));
    // A 1 ms timer: the longest gap between its ticks is the longest the loop was held.
    let last = performance.now();
    let held = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      held = Math.max(held, now - last);
      last = now;
    }, 1);
    cpu = process.cpuUsage();
    started = performance.now();
    const result = await gatehouse.reload("bench");
    const reloadMs = performance.now() - started;
    const reloadCpu = process.cpuUsage(cpu);
    // The block that ends with the reload has not been seen by a tick yet.
    held = Math.max(held, performance.now() - last);
    clearInterval(ticker);
    if (result !== "success") throw new Error(`the reload ended with ${result}`);
    const cpuMs = (usage: NodeJS.CpuUsage) => ((usage.user + usage.system) / 1000).toFixed(0);
    return figuresSection("big-config", [
      [
        `${ROUTES} routes, ready from the start`,
        `${readyMs.toFixed(0)} ms (${cpuMs(readyCpu)} ms CPU)`,
      ],
      ["reload applied", `${reloadMs.toFixed(0)} ms (${cpuMs(reloadCpu)} ms CPU, all threads)`],
      ["event loop held at most, during the reload", `${held.toFixed(1)} ms`],
    ]);
  } finally {
    await gatehouse.shutdown();
  }
}

/** Measures the start and the reload on a 10,000-route file and returns the report. */
export async function measureBigConfig(): Promise<Section> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-bench-big-"));
  try {
    return await measure(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
