/** The processes under test: the upstream, the bare forwarder and gatehouse, each on its own. */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

const UPSTREAM = fileURLToPath(new URL("./upstream.js", import.meta.url));
const BARE = fileURLToPath(new URL("./bare.js", import.meta.url));
const BARE_UNDICI = fileURLToPath(new URL("./bare-undici.js", import.meta.url));
const EXPRESS_STACK = fileURLToPath(new URL("./express-stack.js", import.meta.url));
const CLI = fileURLToPath(new URL("../src/cli.js", import.meta.url));
const STDERR_KEPT = 8192;
const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 30_000;

/** A running child process serving HTTP on 127.0.0.1. */
export interface Served {
  readonly name: string;
  readonly pid: number;
  readonly url: string;
  /** Throws, with the end of the process's stderr, when the process has exited. */
  assertAlive(): void;
  /** SIGTERM, then waits for the exit (SIGKILL after a while). */
  stop(): Promise<void>;
}

function watchChild(name: string, child: ChildProcess, port: number): Served {
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_KEPT);
  });
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  return {
    name,
    pid: child.pid as number,
    url: `http://127.0.0.1:${port}`,
    assertAlive() {
      if (child.exitCode !== null || child.signalCode !== null) {
        const how = child.exitCode ?? child.signalCode;
        throw new Error(`${name} exited (${how}) during the benchmark:\n${stderr}`);
      }
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

// The bench's own children report their port over IPC once listening.
async function forkServed(
  name: string,
  script: string,
  args: string[],
  execArgv: string[],
): Promise<Served> {
  const child = fork(script, args, { execArgv, stdio: ["ignore", "ignore", "pipe", "ipc"] });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start`)), START_TIMEOUT_MS);
    child.once("message", (message) => {
      clearTimeout(timer);
      resolve((message as { port: number }).port);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} while starting`));
    });
  });
  return watchChild(name, child, port);
}

/** Starts the upstream that every target forwards to. */
export function startUpstream(): Promise<Served> {
  return forkServed("upstream", UPSTREAM, [], []);
}

/** Starts the bare http-proxy-3 forwarder in front of `upstreamUrl`. */
export function startBare(upstreamUrl: string, execArgv: string[]): Promise<Served> {
  return forkServed("bare http-proxy-3", BARE, [upstreamUrl], execArgv);
}

/** Starts the bare undici forwarder, the peer of the bare http-proxy-3 one, in front of `upstreamUrl`. */
export function startBareUndici(upstreamUrl: string, execArgv: string[]): Promise<Served> {
  return forkServed("bare undici", BARE_UNDICI, [upstreamUrl], execArgv);
}

/**
 * Starts the Express stack in front of `upstreamUrl`, verifying tokens signed with the key in
 * `keyFile` and requiring `scope`.
 */
export function startExpressStack(
  upstreamUrl: string,
  keyFile: string,
  scope: string,
): Promise<Served> {
  return forkServed("express stack", EXPRESS_STACK, [upstreamUrl, keyFile, scope], []);
}

/** A port that was free a moment ago, for gatehouse's `listen`. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/**
 * Starts gatehouse, called `name`, through its real command line with `configPath` (which must
 * listen on 127.0.0.1:`port`); stdout, the access log included, goes to /dev/null. Resolves once
 * /healthz answers 200.
 */
export async function startGatehouse(
  name: string,
  configPath: string,
  port: number,
  env: NodeJS.ProcessEnv,
  execArgv: string[],
): Promise<Served> {
  const child = spawn(process.execPath, [...execArgv, CLI, "--config", configPath], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const served = watchChild(name, child, port);
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    served.assertAlive();
    try {
      const response = await fetch(`${served.url}/healthz`);
      await response.arrayBuffer();
      if (response.status === 200) return served;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await served.stop();
      throw new Error(`gatehouse did not answer /healthz within ${START_TIMEOUT_MS} ms`);
    }
    await new Promise((done) => setTimeout(done, 100));
  }
}
