/**
 * Liveness and readiness (docs/operations.md): answered by gatehouse itself, never forwarded, on
 * the public listener and on the admin listener alike.
 */
import t from "tap";
import { eventually, json, send, type ClientResponse } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { open, untilClosed } from "./helpers/pipeline.js";
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

/**
 * What a probe reads of an answer: its status, the headers that matter, its body. Every admin
 * answer is `no-store`, the public 405 is not: that header is compared only where it matters.
 */
function seen(answer: ClientResponse, method: string) {
  return {
    status: answer.status,
    cacheControl: method === "GET" || method === "HEAD" ? answer.headers["cache-control"] : "-",
    allow: answer.headers.allow,
    body: answer.body.length === 0 ? "" : json(answer),
  };
}

t.test("the admin listener answers the health paths as the public one does", async (t) => {
  const token = "health-test-admin-token";
  const gh = await startTestGatehouse(config("admin_token_env: HEALTH_TEST_ADMIN_TOKEN\n"), {
    env: { HEALTH_TEST_ADMIN_TOKEN: token },
  });
  t.teardown(() => gh.close());
  for (const [method, path] of [
    ["GET", "/healthz"],
    ["GET", "/readyz?verbose=1"],
    ["HEAD", "/healthz"],
    ["HEAD", "/readyz"],
    ["POST", "/healthz"],
    ["DELETE", "/readyz"],
  ] as const) {
    const expected = seen(await send(`${gh.url}${path}`, { method }), method);
    t.strictSame(
      seen(await send(`${gh.adminUrl}${path}`, { method }), method),
      expected,
      `${method} ${path}`,
    );
  }
  t.strictSame(json(await send(`${gh.adminUrl}/readyz`)), { status: "ready" });
  t.equal(
    (await send(`${gh.adminUrl}/config`)).status,
    401,
    "with admin_token_env set, the probes above needed no token and /config still does",
  );
});

t.test("the admin listener follows the configured health paths", async (t) => {
  const gh = await startTestGatehouse(
    config("health:\n  liveness_path: /live\n  readiness_path: /ready\n"),
  );
  t.teardown(() => gh.close());
  t.strictSame(json(await send(`${gh.adminUrl}/live`)), { status: "ok" });
  t.strictSame(json(await send(`${gh.adminUrl}/ready`)), { status: "ready" });
  t.equal((await send(`${gh.adminUrl}/healthz`)).status, 404, "the default path is not one now");
});

t.test("the admin listener asks for a Host naming it, probes included", async (t) => {
  const gh = await startTestGatehouse(config());
  t.teardown(() => gh.close());
  const foreign = await send(`${gh.adminUrl}/healthz`, { headers: { host: "rebound.example" } });
  t.equal(foreign.status, 421);
  const podIp = await send(`${gh.adminUrl}/healthz`, { headers: { host: "10.1.2.3:9901" } });
  t.equal(podIp.status, 200, "the kubelet's Host, the pod's IP, is answered");
});

t.test(
  "a public listener with every connection busy: the admin listener still answers",
  async (t) => {
    // The upstream holds every request until the test lets it go.
    const held: Array<() => void> = [];
    const holding = await startUpstream((_req, res) => held.push(() => res.end("{}")));
    const gh = await startTestGatehouse(
      configFor(
        holding.url,
        "max_connections: 2\nroutes:\n  - path: /v1/*\n    methods: [GET]\n    auth: none\n",
      ),
    );
    t.teardown(async () => {
      for (const answer of held.splice(0)) answer();
      await gh.close();
      await holding.close();
    });
    const busy = [await open(gh.port), await open(gh.port)];
    const answered = busy.map((socket) => untilClosed(socket));
    for (const socket of busy)
      socket.write("GET /v1/held HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n");
    t.ok(
      await eventually(() => held.length === 2),
      "both requests reach the upstream and wait there",
    );

    const third = await open(gh.port);
    const refused = untilClosed(third);
    third.write("GET /healthz HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n");
    t.equal(await refused, "", "the public listener is full: its probe is closed unanswered");

    const live = await send(`${gh.adminUrl}/healthz`);
    t.equal(live.status, 200, "/healthz on the admin port");
    t.strictSame(json(live), { status: "ok" });
    t.equal((await send(`${gh.adminUrl}/readyz`)).status, 200, "/readyz on the admin port");

    for (const answer of held.splice(0)) answer();
    for (const socket of busy) socket.end();
    for (const text of await Promise.all(answered)) t.match(text, /^HTTP\/1\.1 200 /);
  },
);

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

  const adminReady = await send(`${gh.adminUrl}/readyz`);
  t.equal(adminReady.status, 503, "the admin listener says not ready too");
  t.strictSame(json(adminReady), json(ready));
  t.equal(adminReady.headers["cache-control"], "no-store");
  const adminLive = await send(`${gh.adminUrl}/healthz`);
  t.equal(adminLive.status, 200);
  t.strictSame(json(adminLive), { status: "ok" });

  const forwarded = await send(`${gh.url}/v1/items`);
  t.equal(forwarded.status, 200, "requests during the delay are still served");
  t.equal(
    forwarded.headers.connection,
    "close",
    "and asked to close, so clients reconnect to a replica that stays",
  );
});
