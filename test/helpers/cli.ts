/** Runs the built `gatehouse` command as a child process and reads its JSON log lines. */
import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { createInterface } from "node:readline";

/** A running `gatehouse` process. */
export interface CliProcess {
  readonly child: ChildProcess;
  /** http://HOST:PORT of the public listener, read from the "gatehouse listening" line. */
  readonly url: string;
  readonly adminUrl: string;
  /** The JSON log lines printed so far. */
  lines(): Array<Record<string, unknown>>;
  /** Resolves with the first log line, printed so far or later, for which `match` holds. */
  line(match: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal: NodeJS.Signals): Promise<number | null>;
}

// Paths are the repository's: tests run from its root.
const BUILT_CLI = resolve("dist/src/cli.js");

/** Starts `node <cli> ...args` (the built CLI by default) and waits until it listens. */
export function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  cwd?: string,
  cli = BUILT_CLI,
): Promise<CliProcess> {
  const child = spawn(process.execPath, [cli, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  const waiting = new Set<{
    match: (line: Record<string, unknown>) => boolean;
    found: (line: Record<string, unknown>) => void;
  }>();
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (text) => {
      let line: Record<string, unknown>;
      try {
        line = JSON.parse(text) as Record<string, unknown>;
      } catch {
        return;
      }
      lines.push(line);
      for (const waiter of waiting) {
        if (!waiter.match(line)) continue;
        waiting.delete(waiter);
        waiter.found(line);
      }
      if (line.msg !== "gatehouse listening") return;
      const listen = line.listen as { address: string; port: number };
      const admin = line.admin as { address: string; port: number };
      resolve({
        child,
        url: `http://127.0.0.1:${listen.port}`,
        adminUrl: `http://127.0.0.1:${admin.port}`,
        lines: () => lines,
        line: (match) =>
          new Promise((found) => {
            const seen = lines.find(match);
            if (seen === undefined) waiting.add({ match, found });
            else found(seen);
          }),
        stop(signal) {
          child.kill(signal);
          return exited;
        },
      });
    });
    void exited.then((code) => reject(new Error(`gatehouse exited with ${code}: ${stderr}`)));
  });
}

/** How a command that ran to its end ended. */
export interface CliResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `node <built cli> ...args` to its end, without holding this process's event loop, with
 * `input` (or nothing) on its stdin, in `cwd` when given.
 */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  input = "",
  cwd?: string,
): Promise<CliResult> {
  const child = spawn(process.execPath, [BUILT_CLI, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  // A command that exits before reading stdin closes the pipe under a write: not a failure.
  child.stdin.on("error", () => undefined);
  child.stdin.end(input);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (status) => resolve({ status, stdout, stderr }));
  });
}
