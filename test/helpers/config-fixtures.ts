/** Checks config fixtures: each file is refused with exactly the lines `gatehouse check` prints. */
import type { Test } from "tap";
import { ConfigError } from "../../src/config/load.js";
import { loadSnapshot } from "../../src/config/snapshot.js";

/**
 * One subtest per fixture in `dir`: loading it fails with a ConfigError whose lines are `expected`
 * (each `LINE:COL message`, prefixed here with the path as given).
 */
export function checkConfigFixtures(
  t: Test,
  dir: string,
  expected: Record<string, readonly string[]>,
  env: NodeJS.ProcessEnv = {},
): void {
  for (const [name, lines] of Object.entries(expected)) {
    t.test(name, async (t) => {
      const path = `${dir}/${name}`;
      const error = await loadSnapshot(path, { env }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      t.ok(error instanceof ConfigError, "the file is refused with a ConfigError");
      t.strictSame(
        (error as ConfigError).message.split("\n"),
        lines.map((line) => `${path}:${line}`),
      );
    });
  }
}
