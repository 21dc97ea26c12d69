/**
 * A Redis server of the test's own (Debian's redis-server, on a free port), so a test can stop,
 * pause and restart it without touching the machine's Redis or another test's.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createConnection } from "node:net";
import { refusingPort } from "./ports.js";
import { randomBytes } from "node:crypto";
import type { RedisSettings } from "../../src/limits/plans.js";
import { PIPE_CONNECTION_NAME } from "../../src/limits/script-pipe.js";

/** A private redis-server. */
export interface TestRedis {
  readonly port: number;
  readonly url: string;
  /** SIGKILL: the server is gone, its port refuses connections. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT: connected but silent, as a Redis stalled by a long command or swap. */
  pause(): void;
  resume(): void;
  /** A new server on the same port, empty. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

/** Whether a PING on `port` is answered (PONG, or an error such as NOAUTH: the server is up). */
export function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: "127.0.0.1" });
    socket.setTimeout(500, () => socket.destroy());
    socket.once("error", () => resolve(false));
    socket.once("close", () => resolve(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      resolve(/^[+-]/.test(data.toString("latin1")));
      socket.destroy();
    });
  });
}

/** The arguments of a private server on `port`: loopback only, nothing saved to disk. */
export function serverArgs(port: number): string[] {
  return ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
}

/**
 * Starts `redis-server ARGS` and waits until `ready` says it answers; its output is kept, so that
 * a server that exits says why.
 */
export async function launchRedis(
  args: readonly string[],
  ready: () => Promise<boolean>,
): Promise<ChildProcess> {
  const child = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk: Buffer): void =>
    void (output = (output + chunk.toString("utf8")).slice(-2000));
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const failed = new Promise<never>((_, reject) => {
    child.once("error", reject);
    child.once("exit", (code) =>
      reject(new Error(`redis-server exited with ${code}: ${output.trim()}`)),
    );
  });
  failed.catch(() => undefined);
  for (let attempt = 0; attempt < 100; attempt++) {
    if (await Promise.race([ready(), failed])) return child;
    await new Promise((done) => setTimeout(done, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server ${args.join(" ")} did not answer`);
}

const launch = (port: number): Promise<ChildProcess> =>
  launchRedis(serverArgs(port), () => answers(port));

/** Ends `child` with `signal` (a paused one is woken first) and waits for its exit. */
export function stopProcess(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  child.kill("SIGCONT");
  child.kill(signal);
  return exited;
}

/** Starts a private redis-server on a free port (another, should the port be taken meanwhile). */
export async function startTestRedis(): Promise<TestRedis> {
  let port = await refusingPort();
  let child = await launch(port).catch(async () => {
    port = await refusingPort();
    return launch(port);
  });
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill: () => stopProcess(child, "SIGKILL"),
    pause: () => void child.kill("SIGSTOP"),
    resume: () => void child.kill("SIGCONT"),
    async restart() {
      await stopProcess(child, "SIGKILL");
      child = await launch(port);
    },
    close: () => stopProcess(child, "SIGKILL"),
  };
}

/** The lines of a `CLIENT LIST` reply for gatehouse's script pipes whose last command ran the script. */
export function scriptPipes(clientList: string): string[] {
  return clientList
    .split("\n")
    .filter(
      (line) => line.includes(` name=${PIPE_CONNECTION_NAME} `) && / cmd=evalsha /.test(line),
    );
}

/**
 * The compiled settings of one plain server at `url`, with a key prefix of the test's own; `more`
 * overrides any of them.
 */
export function serverSettings(url: string, more: Partial<RedisSettings> = {}): RedisSettings {
  return {
    topology: { kind: "server", url },
    username: undefined,
    password: undefined,
    tls: undefined,
    connectionKey: url,
    display: url,
    keyPrefix: `gh-${randomBytes(4).toString("hex")}:`,
    timeoutMs: 10_000,
    onOutage: "closed",
    ...more,
  };
}
