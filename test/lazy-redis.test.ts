/**
 * A gatehouse on the memory store never loads the Redis client: every pod pays for what it
 * loads at start. The file imports nothing that reaches ioredis, so the module cache tells.
 */
import { createRequire } from "node:module";
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const loaded = (): boolean =>
  Object.keys(createRequire(import.meta.url).cache).some((path) => path.includes("/ioredis/"));

t.test(
  "the memory store starts without the Redis client; a reload to Redis loads it",
  async (t) => {
    const upstream = await startUpstream();
    t.teardown(() => upstream.close());
    const plans = "plans:\n  anonymous:\n    rate_limit: { limit: 5, window: 1m }\n";
    const g = await startTestGatehouse(configFor(upstream.url, plans));
    t.teardown(() => g.close());
    t.equal(loaded(), false, "not loaded for the memory store");
    await g.writeConfig(
      configFor(
        upstream.url,
        `${plans}limits:\n  store: redis\n  redis:\n    url: redis://127.0.0.1:1\n    on_outage: open\n`,
      ),
    );
    t.equal(await g.gatehouse.reload(), "success");
    t.equal(loaded(), true, "loaded once a config names Redis");
  },
);
