/** Liveness and readiness (docs/operations.md): answered by gatehouse itself, never forwarded. */
import t from "tap";
import { json, send } from "./helpers/client.js";
import { startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

function config(extra = "", delay = "0s"): string {
  return `upstream:
  url: ${upstream.url}
  timeout: 2s
shutdown:
  delay: ${delay}
  grace: 2s
routes:
  - path: /**
    methods: [GET, HEAD, POST]
    auth: none
${extra}`;
}

t.test("liveness and readiness while serving", async (t) => {
  const gh = await startTestGatehouse(config());
  t.teardown(() => gh.close());
  const before = upstream.received.length;

  const live = await send(`${gh.url}/healthz`);
  t.equal(live.status, 200);
  t.strictSame(json(live), { status: "ok" });
  t.equal(live.headers["cache-control"], "no-store");
  t.type(live.headers["x-request-id"], "string");

  const ready = await send(`${gh.url}/readyz`);
  t.equal(ready.status, 200);
  t.strictSame(json(ready), { status: "ready" });

  const head = await send(`${gh.url}/healthz`, { method: "HEAD" });
  t.equal(head.status, 200);
  t.equal(head.body.length, 0);

  t.equal((await send(`${gh.url}/readyz?verbose=1`)).status, 200, "a query does not matter");
  t.equal((await send(`${gh.url}/%72eadyz`)).status, 200, "the canonical path is matched");

  const post = await send(`${gh.url}/healthz`, { method: "POST", body: "x" });
  t.equal(post.status, 405);
  t.equal(post.headers.allow, "GET, HEAD");
  t.match(json(post), { error: "method_not_allowed" });

  t.equal(upstream.received.length, before, "a route covering /** does not take them over");

  t.equal((await send(`${gh.url}/healthz/x`)).status, 200, "only the exact paths are own paths");
  t.equal(upstream.received.at(-1)?.url, "/healthz/x");
});

t.test("the health paths come from the config", async (t) => {
  const gh = await startTestGatehouse(
    config("health:\n  liveness_path: /live\n  readiness_path: /ready\n"),
  );
  t.teardown(() => gh.close());
  t.strictSame(json(await send(`${gh.url}/live`)), { status: "ok" });
  t.strictSame(json(await send(`${gh.url}/ready`)), { status: "ready" });
  const before = upstream.received.length;
  await send(`${gh.url}/healthz`);
  t.equal(upstream.received.length, before + 1, "the default path is an ordinary path now");
});

t.test("while draining: /readyz 503 with Connection: close, /healthz still 200", async (t) => {
  const gh = await startTestGatehouse(config("", "2s"));
  const stopped = gh.gatehouse.shutdown();
  t.teardown(async () => {
    await stopped;
    await gh.close();
  });

  // shutdown.delay (2s) keeps the listener open while readiness reports 503.
  const ready = await send(`${gh.url}/readyz`);
  t.equal(ready.status, 503);
  t.match(json(ready), { error: "not_ready", message: String });
  t.equal(ready.headers.connection, "close");
  t.equal(ready.headers["cache-control"], "no-store");

  const live = await send(`${gh.url}/healthz`);
  t.equal(live.status, 200, "the process is still alive");
  t.equal(live.headers.connection, "close");

  const forwarded = await send(`${gh.url}/v1/items`);
  t.equal(forwarded.status, 200, "requests during the delay are still served");
  t.equal(
    forwarded.headers.connection,
    "close",
    "and asked to close, so clients reconnect to a replica that stays",
  );
});
