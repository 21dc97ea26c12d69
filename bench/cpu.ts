/** CPU time of another process, read from outside so that measuring costs the process nothing. */
import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU time used so far by every thread of process `pid`, in nanoseconds: the sum of each
 * thread's `/proc/PID/task/TID/schedstat` run time (nanosecond resolution, unlike the clock
 * ticks of `/proc/PID/stat`). Node's threads (main, V8 platform, libuv pool) live as long as the
 * process, so none of the time is lost with an exited thread.
 */
export function processCpuNs(pid: number): number {
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8");
    } catch {
      // The thread ended between listing and reading.
      continue;
    }
    total += Number(text.slice(0, text.indexOf(" ")));
  }
  return total;
}
