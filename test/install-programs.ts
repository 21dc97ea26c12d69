/**
 * Run by `npm run test:unit` before tap: installs the programs some tests drive that npm does not
 * provide, from the Debian archive where the machine lacks them: Chromium, promtool, and curl and
 * openssl, which docs/getting-started.md has its reader run. Installing Chromium takes minutes on
 * a fresh machine, longer than one test file may run; the tests themselves then find them on
 * PATH. Not tap's `before` script, whose coverage a run without coverage would still measure.
 */
import { ensureDebianPackage } from "./helpers/debian.js";

for (const [binary, pkg] of [
  ["chromium", "chromium"],
  ["promtool", "prometheus"],
  ["curl", "curl"],
  ["openssl", "openssl"],
] as const) {
  console.log(`# ${binary}: ${ensureDebianPackage(binary, pkg)}`);
}
