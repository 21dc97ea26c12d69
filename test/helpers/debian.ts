/**
 * Programs some tests run that are not npm packages (promtool), installed from the Debian archive
 * when a machine lacks them, as CI's fresh machines do. A test that needs one fails, saying how
 * to install it, where it cannot be installed: never skipped without a word.
 */
import { spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  existsSync,
  readdirSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { delimiter, join } from "node:path";

/** The path of `binary` on PATH, or undefined. */
function onPath(binary: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter).filter(Boolean)) {
    const path = join(dir, binary);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // Not in this folder.
    }
  }
  return undefined;
}

// apt-get, without questions, waiting for another install's lock rather than failing at once.
function aptGet(...args: string[]) {
  return spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=300", ...args], {
    encoding: "utf8",
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
}

/** The processes running now, by id. */
function processIds(): Set<number> {
  return new Set(
    readdirSync("/proc")
      .filter((name) => /^\d+$/.test(name))
      .map(Number),
  );
}

// Debian's maintainer scripts start a package's service through invoke-rc.d or deb-systemd-invoke,
// both of which ask /usr/sbin/policy-rc.d first; exit 101 means "not now" (Debian Policy, the
// invoke-rc.d interface). One is put there for the install, where the machine has none.
const POLICY = "/usr/sbin/policy-rc.d";

/**
 * Stops any process the install started from one of `pkg`'s files (a daemon a maintainer script
 * started despite the policy), by its id: a test setup leaves no service running.
 */
function stopStartedDaemons(pkg: string, before: Set<number>): void {
  const files = new Set(
    spawnSync("dpkg", ["-L", pkg], { encoding: "utf8" }).stdout.split("\n").filter(Boolean),
  );
  for (const pid of processIds()) {
    if (before.has(pid)) continue;
    try {
      if (files.has(readlinkSync(`/proc/${pid}/exe`))) process.kill(pid, "SIGTERM");
    } catch {
      // Gone already, or not ours to read.
    }
  }
}

/** Installs `pkg` with apt-get, without its recommended packages; its output when it fails. */
function install(pkg: string): string | undefined {
  const ownPolicy = !existsSync(POLICY);
  if (ownPolicy) writeFileSync(POLICY, "#!/bin/sh\nexit 101\n", { mode: 0o755 });
  const before = processIds();
  try {
    const args = ["install", "-y", "-qq", "--no-install-recommends", pkg];
    let run = aptGet(...args);
    // A fresh machine's package lists may be missing or out of date.
    if (run.status !== 0) {
      const update = aptGet("update", "-qq");
      run = update.status === 0 ? aptGet(...args) : update;
    }
    return run.status === 0 ? undefined : `${run.stderr}${run.stdout}`.trim();
  } finally {
    if (ownPolicy) rmSync(POLICY, { force: true });
    stopStartedDaemons(pkg, before);
  }
}

const ensured = new Map<string, string>();

/**
 * The path of `binary`, installing the Debian package `pkg` that provides it when it is not on
 * PATH (once per process). Throws, saying what to install, when it is missing and cannot be
 * installed here: without root, without apt-get, or when the install fails.
 */
export function ensureDebianPackage(binary: string, pkg: string): string {
  const known = ensured.get(binary) ?? onPath(binary);
  if (known !== undefined) {
    ensured.set(binary, known);
    return known;
  }
  const how = `install the Debian package ${pkg} (apt-get install ${pkg}), which provides ${binary}`;
  if (process.getuid?.() !== 0 || onPath("apt-get") === undefined) {
    throw new Error(`${binary} is not on PATH and cannot be installed from here: ${how}`);
  }
  const failed = install(pkg);
  const path = onPath(binary);
  if (path === undefined) {
    throw new Error(
      `${binary} is still not on PATH after apt-get install ${pkg}: ${failed ?? how}`,
    );
  }
  ensured.set(binary, path);
  return path;
}
