/**
 * Graceful shutdown of the built CLI (docs/operations.md, Shutdown): on SIGTERM readiness
 * turns 503, the listener closes after `shutdown.delay`, requests in flight finish, exit 0.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request as httpRequest } from "node:http";
import t from "tap";
import { startCli, type CliProcess } from "./helpers/cli.js";
import { eventually, json, send, type ClientResponse } from "./helpers/client.js";
import { startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const DEADLINE_MS = 30_000;

// The upstream holds /v1/slow until the test releases it.
const releases: Array<() => void> = [];
const upstream = await startUpstream((req, res) => {
  if (req.url === "/v1/slow") {
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("started ");
    releases.push(() => res.end("and finished"));
  } else {
    res.end("fast");
  }
});
t.teardown(() => upstream.close());

const started: CliProcess[] = [];
const dirs: string[] = [];
t.teardown(async () => {
  for (const cli of started) {
    if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill("SIGKILL");
  }
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** Starts the built CLI with the given `shutdown` settings in front of the upstream. */
async function startProxy(shutdown: string): Promise<CliProcess> {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-shutdown-"));
  const configPath = join(dir, "proxy.config.yaml");
  await writeFile(
    configPath,
    `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstream.url}
shutdown: ${shutdown}
routes:
  - path: /v1/*
    methods: [GET]
    auth: none
`,
  );
  dirs.push(dir);
  const cli = await startCli(["--config", configPath]);
  started.push(cli);
  return cli;
}

/** Starts a request to /v1/slow and resolves, once the upstream holds it, with its answer to come. */
async function slowRequest(url: string): Promise<{ response: Promise<ClientResponse> }> {
  const before = releases.length;
  const response = send(`${url}/v1/slow`);
  response.catch(() => undefined);
  if (!(await eventually(async () => releases.length > before, DEADLINE_MS))) {
    throw new Error("the slow request never reached the upstream");
  }
  // Wrapped: an async function returning a promise would wait for it.
  return { response };
}

function exitOf(cli: CliProcess): Promise<number | null> {
  if (cli.child.exitCode !== null) return Promise.resolve(cli.child.exitCode);
  return new Promise((done) => cli.child.once("exit", (code) => done(code)));
}

/** True once a new connection to `url` is refused. */
async function refuses(url: string): Promise<boolean> {
  try {
    await send(`${url}/healthz`);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ECONNREFUSED";
  }
}

t.test("SIGTERM: not ready, stop accepting, finish the request in flight, exit 0", async (t) => {
  const cli = await startProxy("{ delay: 2s, grace: 20s }");
  const inFlight = (await slowRequest(cli.url)).response;
  const exited = exitOf(cli);
  cli.child.kill("SIGTERM");

  t.ok(
    await eventually(async () => (await send(`${cli.url}/readyz`)).status === 503, DEADLINE_MS),
    "/readyz answers 503 during shutdown.delay",
  );
  t.ok(await eventually(() => refuses(cli.url), DEADLINE_MS), "new connections are refused");
  t.equal(cli.child.exitCode, null, "the process waits for the request in flight");
  // The public listener is closed; the admin listener answers the probes until the drain ends.
  const ready = await send(`${cli.adminUrl}/readyz`);
  t.equal(ready.status, 503, "/readyz on the admin port answers 503 while draining");
  t.match(json(ready), { error: "not_ready" });
  t.equal((await send(`${cli.adminUrl}/healthz`)).status, 200, "and /healthz 200");

  releases.at(-1)?.();
  const res = await inFlight;
  t.equal(res.status, 200, "the request in flight completes");
  t.equal(res.body.toString(), "started and finished", "with its whole body");
  t.equal(res.headers.connection, "close", "asked to close, as every response while draining");
  t.equal(await exited, 0, "exit code 0");
  t.ok(
    cli.lines().some((l) => l.msg === "stopped"),
    "the last log line is flushed before exit",
  );
});

t.test("SIGINT drains the same way", async (t) => {
  const cli = await startProxy("{ delay: 0s, grace: 20s }");
  const inFlight = (await slowRequest(cli.url)).response;
  const exited = exitOf(cli);
  cli.child.kill("SIGINT");
  t.ok(await eventually(() => refuses(cli.url), DEADLINE_MS), "new connections are refused");
  releases.at(-1)?.();
  t.equal((await inFlight).status, 200);
  t.equal(await exited, 0);
});

t.test("when the grace period is over, the rest is cut and the process exits 0", async (t) => {
  const cli = await startProxy("{ delay: 0s, grace: 300ms }");
  const client = await new Promise<{ complete: () => boolean; closed: Promise<void> }>(
    (resolve, reject) => {
      const req = httpRequest(`${cli.url}/v1/slow`, { agent: false });
      req.on("error", reject);
      req.on("response", (res) => {
        res.resume();
        res.on("error", () => undefined);
        const closed = new Promise<void>((done) => res.on("close", done));
        resolve({ complete: () => res.complete, closed });
      });
      req.end();
    },
  );
  const exited = exitOf(cli);
  cli.child.kill("SIGTERM");
  t.equal(await exited, 0);
  await client.closed;
  t.equal(client.complete(), false, "the unfinished response is cut, not completed");
  t.ok(cli.lines().some((l) => l.msg === "grace period over; closing the remaining connections"));
  releases.at(-1)?.();
});

t.test("a second signal exits at once, without waiting for requests", async (t) => {
  const cli = await startProxy("{ delay: 0s, grace: 20s }");
  const inFlight = (await slowRequest(cli.url)).response;
  const exited = exitOf(cli);
  cli.child.kill("SIGTERM");
  t.ok(await eventually(() => refuses(cli.url), DEADLINE_MS));
  cli.child.kill("SIGTERM");
  t.equal(await exited, 1, "exit code 1: requests were abandoned");
  await t.rejects(inFlight, "the request in flight is cut");
  releases.at(-1)?.();
});

t.test("with nothing in flight, SIGTERM exits 0", async (t) => {
  const cli = await startProxy("{ delay: 0s, grace: 20s }");
  t.equal((await send(`${cli.url}/v1/fast`)).status, 200);
  t.equal(await cli.stop("SIGTERM"), 0);
});

t.test(
  "a drain that ends before the grace period leaves no timer to hold the process",
  async (t) => {
    const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout");
    const before = timers().length;
    const { gatehouse } = await startTestGatehouse(
      `upstream:\n  url: ${upstream.url}\nshutdown: { delay: 0s, grace: 1h }\n`,
    );
    await gatehouse.shutdown();
    t.equal(timers().length, before, "every timer the run made is gone");
  },
);
