/**
 * What a start loads: gatehouse on the example config (memory store, no tracing endpoint)
 * loads neither the Redis client, nor Node's fetch client (undici, which an ES import of
 * node:http pulls in on Node 24), nor the OpenTelemetry SDK. Every pod pays for what it loads.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import t from "tap";

// What a start on `configPath` has loaded, checked in a process of its own: what tap loads in
// this one says nothing about a start.
function loadedBy(configPath: string): Record<string, boolean> {
  const server = pathToFileURL(resolve("dist/src/server.js")).href;
  const script = `
    import { createRequire } from "node:module";
    const { startGatehouse } = await import(${JSON.stringify(server)});
    const { pino } = await import("pino");
    const g = await startGatehouse({
      configPath: ${JSON.stringify(configPath)},
      log: pino({ level: "silent" }),
      watch: false,
      listen: { host: "127.0.0.1", port: 0 },
      adminListen: { host: "127.0.0.1", port: 0 },
    });
    const cache = Object.keys(createRequire(import.meta.url).cache);
    const has = (part) => cache.some((path) => path.includes(part));
    const builtins = process.moduleLoadList.join(" ");
    process.stdout.write(JSON.stringify({
      ioredis: has("/node_modules/ioredis/"),
      undici: builtins.includes("undici"),
      otel: has("/node_modules/@opentelemetry/sdk-trace/"),
    }));
    await g.shutdown();`;
  return JSON.parse(
    execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
    }),
  ) as Record<string, boolean>;
}

const example = resolve("proxy.config.yaml");

t.test("the example config starts without ioredis, undici or the OpenTelemetry SDK", async (t) => {
  t.strictSame(loadedBy(example), { ioredis: false, undici: false, otel: false });
});

t.test("a tracing endpoint loads the OpenTelemetry SDK", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-loads-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, "proxy.config.yaml");
  // A port nothing is asked on: the start exports nothing, having answered no request.
  const text = (await readFile(example, "utf8")).replace(
    'otlp_endpoint: ""',
    "otlp_endpoint: http://127.0.0.1:4318",
  );
  await writeFile(path, text);
  t.equal(loadedBy(path).otel, true);
});
