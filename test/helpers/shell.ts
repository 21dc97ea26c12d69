/**
 * One bash session fed commands a block at a time, as a reader pastes them into a terminal: the
 * variables one block sets are there for the next, and a command left in the background keeps
 * running.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";

/** A running session. */
export interface Shell {
  /**
   * Runs `script`; resolves with what it printed, stdout and stderr together. A command that
   * fails ends the session (`set -e`), and the promise is rejected with what was printed.
   */
  run(script: string): Promise<string>;
  /** Ends the session and every process it started, which are all in its process group. */
  close(): Promise<void>;
}

/** Starts bash in `cwd` with `env`. */
export function startShell(cwd: string, env: NodeJS.ProcessEnv): Shell {
  // Its own process group: what it leaves running in the background is ended with it.
  const child = spawn("bash", [], { cwd, env, detached: true, stdio: ["pipe", "pipe", "ignore"] });
  const pid = child.pid as number;
  let running = true;
  const exited = new Promise<number | null>((done) =>
    child.once("exit", (code) => {
      running = false;
      done(code);
    }),
  );
  let printed = "";
  let arrived: () => void = () => undefined;
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    printed += chunk;
    arrived();
  });
  child.stdin.on("error", () => undefined);
  child.stdin.write("exec 2>&1\nset -e\n");
  return {
    run(script) {
      // Printed after the script, on a line of its own: the end of its output.
      const end = `\nend of block ${randomBytes(8).toString("hex")}\n`;
      child.stdin.write(`${script}\nprintf '${end.replace(/\n/g, "\\n")}'\n`);
      return new Promise((resolve, reject) => {
        arrived = () => {
          const at = printed.indexOf(end);
          if (at === -1) return;
          resolve(printed.slice(0, at));
          printed = printed.slice(at + end.length);
        };
        arrived();
        void exited.then((code) =>
          reject(new Error(`bash exited with ${code} in:\n${script}\nhaving printed:\n${printed}`)),
        );
      });
    },
    async close() {
      try {
        process.kill(-pid, "SIGTERM");
      } catch {
        // The group is gone: bash and everything it started have ended.
      }
      if (running) await exited;
    },
  };
}
