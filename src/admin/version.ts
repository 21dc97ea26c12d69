/** gatehouse's version, as package.json says it: for `gatehouse version` and `GET /version`. */
import { readFileSync } from "node:fs";

let version: string | undefined;

/**
 * The `version` of gatehouse's package.json, found by walking up from this module: the same code
 * runs from `src/` under the tests and from `dist/src/` once built, at different depths.
 */
export function packageVersion(): string {
  if (version !== undefined) return version;
  for (let up = new URL("../", import.meta.url); ; up = new URL("../", up)) {
    try {
      const manifest = JSON.parse(readFileSync(new URL("package.json", up), "utf8")) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === "gatehouse" && typeof manifest.version === "string") {
        version = manifest.version;
        return version;
      }
    } catch {
      // No package.json at this level: look one further up.
    }
    if (up.pathname === "/") throw new Error("gatehouse's package.json was not found");
  }
}
