/**
 * CPU pinning with taskset: the proxies under test get a core of their own, and the upstream and
 * the load generator share the others, so a proxy's CPU time is never the cost of being preempted
 * by its own load (on a 2-core machine this is most of the run-to-run noise).
 */
import { execFileSync } from "node:child_process";
import { availableParallelism } from "node:os";

/** Which cores the proxies and the rest run on, or null when pinning is not possible here. */
export interface Pinning {
  readonly proxies: string;
  readonly others: string;
}

/** The pinning for this machine: the last core for the proxies; null without taskset or 2 cores. */
export function choosePinning(): Pinning | null {
  const cores = availableParallelism();
  if (cores < 2) return null;
  try {
    execFileSync("taskset", ["-p", String(process.pid)], { stdio: "ignore" });
  } catch {
    return null;
  }
  return { proxies: String(cores - 1), others: cores === 2 ? "0" : `0-${cores - 2}` };
}

/** Pins every thread of process `pid` to `cores` (a taskset list such as "0-2"). */
export function pin(pid: number, cores: string): void {
  execFileSync("taskset", ["-a", "-p", "-c", cores, String(pid)], { stdio: "ignore" });
}

/** The command and arguments that run `command` pinned to `cores` (unchanged when null). */
export function pinned(cores: string | null, command: string, args: string[]): [string, string[]] {
  return cores === null ? [command, args] : ["taskset", ["-c", cores, command, ...args]];
}
