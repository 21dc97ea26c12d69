/**
 * A read that gets no answer holds a reload for 5 s at most: the reload is refused naming the
 * file, the reload gate is free again, requests are served meanwhile, and a later valid change
 * applies. The read is kept waiting for real, as a file system that does not answer (a hard NFS
 * mount whose server is gone) keeps it: every thread of libuv's pool is taken by an open of a FIFO
 * without O_NONBLOCK, which waits in the kernel until a writer comes.
 */
import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync, writeFileSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import t from "tap";
import { eventually } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { sampleValue, scrape } from "./helpers/metrics.js";
import { startUpstream } from "./helpers/upstream.js";

// Node's default, unless the environment sets another.
const THREADS = Number(process.env.UV_THREADPOOL_SIZE) || 4;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const route = (path: string) => `  - path: ${path}\n    methods: [GET]\n    auth: none\n`;

t.test(
  "a reload whose read gets no answer is refused after 5 s; a later one applies",
  async (t) => {
    const g = await startTestGatehouse(configFor(upstream.url, `routes:\n${route("/before")}`));
    t.teardown(() => g.close());
    const fifos = Array.from({ length: THREADS }, (_, i) => join(g.dir, `taken-${i}`));
    for (const fifo of fifos) execFileSync("mkfifo", [fifo]);
    const taken: Array<Promise<FileHandle>> = fifos.map((fifo) => open(fifo, "r"));
    let released = false;
    // Each waiting open ends when a writer opens its FIFO (without waiting for a reader: one is
    // there, or soon will be).
    const release = async () => {
      if (released) return;
      released = true;
      for (const fifo of fifos)
        closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
      for (const handle of await Promise.all(taken)) await handle.close();
    };
    t.teardown(release);

    // Written on this thread: an asynchronous write would wait for the pool as well.
    writeFileSync(g.configPath, configFor(upstream.url, `routes:\n${route("/during")}`));
    t.equal(await g.gatehouse.reload("test"), "failure", "refused once the 5 s are over");
    const failed = g.logs.find(
      (l) => l.msg === "config reload failed; the running config stays in force",
    );
    t.strictSame(failed?.problems, [
      `${g.configPath}:1:1 cannot be read (no answer from its file system within 5 s)`,
    ]);
    t.equal(
      await g.gatehouse.reload("again"),
      "failure",
      "the gate is free: the next reload does not wait for the read still waiting",
    );
    const failures = sampleValue(await scrape(g), "gatehouse_config_reloads_total", {
      result: "failure",
    });
    t.equal(failures, 1, "the same unanswered read is one failure");
    t.equal((await fetch(`${g.url}/before`)).status, 200, "the config in force serves meanwhile");

    await release();
    writeFileSync(g.configPath, configFor(upstream.url, `routes:\n${route("/after")}`));
    // The read left waiting needs a free thread, then several more steps, before it has answered;
    // until it has, a reload is refused at once, as above. However busy the machine, it answers.
    t.ok(
      await eventually(async () => (await g.gatehouse.reload("fixed")) === "success"),
      "a later valid change applies",
    );
    t.equal((await fetch(`${g.url}/after`)).status, 200);
    t.equal((await fetch(`${g.url}/before`)).status, 404);
  },
);
