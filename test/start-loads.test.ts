/**
 * What a start loads: gatehouse on the example config (memory store) loads neither the Redis
 * client nor Node's fetch client (undici, which an ES import of node:http pulls in on Node 24).
 * Every pod pays for what it loads.
 */
import { execFileSync } from "node:child_process";
import t from "tap";

t.test("the example config starts without ioredis or undici", async (t) => {
  // In a process of its own: what tap loads in this one says nothing about a start.
  const server = new URL("../dist/src/server.js", import.meta.url).href;
  const example = new URL("../proxy.config.yaml", import.meta.url).pathname;
  const script = `
    import { createRequire } from "node:module";
    const { startGatehouse } = await import(${JSON.stringify(server)});
    const { pino } = await import("pino");
    const g = await startGatehouse({
      configPath: ${JSON.stringify(example)},
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
    }));
    await g.shutdown();`;
  const loaded = JSON.parse(
    execFileSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      cwd: new URL("..", import.meta.url).pathname,
    }),
  ) as Record<string, boolean>;
  t.strictSame(loaded, { ioredis: false, undici: false });
});
