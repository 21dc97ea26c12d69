/**
 * The limits' scenarios, joined to a run by bench/run.ts: `redis` adds a side-by-side scenario to
 * the run's table and its own figures after it; `keys` measures the memory store's cost per
 * tracked client on its own. Both print Markdown sections that go after the run's table.
 */
import { measureKeys } from "./keys.js";
import type { LimitsContext } from "./limits-kit.js";
import type { Served } from "./processes.js";
import { prepareRedis } from "./redis.js";
import type { Scenario, Skipped } from "./scenarios.js";

export type { LimitsContext } from "./limits-kit.js";

const NAMES: readonly string[] = ["keys", "redis"];

/** Whether `name` is one of the limits' scenarios, which bench/scenarios.ts does not build. */
export function isLimitScenario(name: string): boolean {
  return NAMES.includes(name);
}

/** What the limits' scenarios add to a run. */
export interface LimitScenarios {
  /** Side-by-side scenarios, warmed up and measured with the run's own. */
  readonly ready: Scenario[];
  readonly skipped: Skipped[];
  /** Processes started for them, for the run to stop. */
  readonly started: Served[];
  /** Runs their own measurements, after the run's; returns their Markdown sections. */
  measure(): Promise<string>;
}

/** Prepares the wanted limits' scenarios within a run. */
export async function prepareLimitScenarios(
  wanted: readonly string[],
  context: LimitsContext,
): Promise<LimitScenarios> {
  const redis = wanted.includes("redis") ? await prepareRedis(context) : undefined;
  return {
    ready: redis?.ready ?? [],
    skipped: redis?.skipped ?? [],
    started: redis?.started ?? [],
    async measure() {
      const sections: string[] = [];
      if (redis !== undefined) sections.push(await redis.measure());
      if (wanted.includes("keys")) sections.push(await measureKeys(context));
      return sections.join("\n");
    },
  };
}
