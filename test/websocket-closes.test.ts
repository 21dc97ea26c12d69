/**
 * How a WebSocket connection through gatehouse ends when gatehouse ends it: 1008 when its token
 * expires or is revoked or a reload no longer accepts its client, 1001 when it is idle or the
 * process shuts down, each close frame written to both sides; and what stays bounded while a
 * client does not read. Time is the test's own, but for a token 40 days long, which needs the
 * process's own timers to show that it is not closed at once.
 */
import t, { type Test } from "tap";
import type { WebSocket } from "ws";
import { startOnTestClock, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { manualClock } from "./helpers/clock.js";
import { startProvider } from "./helpers/provider.js";
import { metric } from "./helpers/metrics.js";
import { revokeWithSecret } from "./helpers/assertions.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { eventually } from "./helpers/client.js";
import { closed, nextMessage, openWs, startWsUpstream } from "./helpers/websocket.js";

const APP = { id: "dashboard", secret: "5d41402abc4b2a76b9719d911017c592" };
const OTHER = { id: "ticker", secret: "7d793037a0760186574b0282f2f435e7" };
const START = Date.UTC(2026, 0, 5, 12);

const upstream = await startWsUpstream();
t.teardown(() => upstream.close());

/**
 * YAML: the echoing upstream and the clients `clients`, with tokens of `ttl`, more lines for
 * `tokens` and more entries for `clients`.
 */
async function config(
  clients: readonly TestClient[],
  { ttl = "10m", tokens = "", entries = "" } = {},
): Promise<string> {
  return `upstream:
  url: ${upstream.url}
  timeout: 2s
  websocket:
    idle_timeout: 1m
shutdown:
  grace: 2s
tokens:
  ttl: ${ttl}
${tokens}${await clientsYaml(clients)}${entries}routes:
  - path: /ws
    methods: [GET]
    websocket: true
`;
}

/** A gatehouse on a clock of the test's own, in front of the echoing upstream. */
async function gatehouse(t: Test, clients: readonly TestClient[] = [APP]) {
  return startOnTestClock(t, await config(clients), START);
}

/** An open connection to `g` with `token`; echoes once, so both sides are up. */
async function openWith(g: TestGatehouse, token: string): Promise<WebSocket> {
  const opened = await openWs(`${g.url.replace("http:", "ws:")}/ws`, {
    authorization: `Bearer ${token}`,
  });
  if (!("ws" in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`);
  opened.ws.send("up");
  await nextMessage(opened.ws);
  return opened.ws;
}

/** An open connection to `g` with a token of `client`. */
async function connect(
  g: TestGatehouse,
  client: TestClient = APP,
): Promise<{ ws: WebSocket; token: string }> {
  const token = await obtainToken(g.url, client);
  return { ws: await openWith(g, token), token };
}

/**
 * Both sides got `code`, and the access log and metrics say gatehouse closed it for `reason`;
 * `open` connections are left.
 */
async function closedByGatehouse(
  t: Test,
  g: TestGatehouse,
  end: Promise<{ code: number }>,
  code: number,
  reason: string,
  open = 0,
): Promise<void> {
  t.equal((await end).code, code, `the client got ${code}`);
  t.ok(await eventually(() => upstream.closes.includes(code)), `the upstream got ${code}`);
  const line = await g.logged((entry) => entry.status === 101);
  t.match(line, { closedBy: "gatehouse", closeReason: reason, route: "/ws" });
  const labels = { route: "/ws", closed_by: "gatehouse", reason };
  t.equal(await metric(g, "gatehouse_websocket_closes_total", labels), 1);
  t.equal(await metric(g, "gatehouse_websocket_connections", { route: "/ws" }), open);
}

t.beforeEach(() => void upstream.closes.splice(0));

t.test("idle: 1001 once no frame passed for idle_timeout, and not before", async (t) => {
  const { g, advance } = await gatehouse(t);
  const { ws } = await connect(g);
  const end = closed(ws);
  advance(50_000);
  ws.send("still here");
  await nextMessage(ws);
  advance(50_000);
  t.equal(ws.readyState, ws.OPEN, "a frame 50 s ago keeps it open");
  advance(10_000);
  await closedByGatehouse(t, g, end, 1001, "idle");
});

t.test("the token's expiry: 1008 at its exp (plus the clock tolerance)", async (t) => {
  const { g, advance } = await gatehouse(t);
  const { ws } = await connect(g);
  const end = closed(ws);
  // Kept alive meanwhile, so idleness is not what closes it.
  for (let minute = 0; minute < 10; minute++) {
    advance(59_000);
    ws.send("ping");
    await nextMessage(ws);
  }
  t.equal(ws.readyState, ws.OPEN, "open while the token is good");
  advance(60_000);
  await closedByGatehouse(t, g, end, 1008, "token_expired");
});

t.test("revocation: 1008 within the next check after the token is revoked", async (t) => {
  const { g, advance } = await gatehouse(t);
  const { ws, token } = await connect(g);
  const end = closed(ws);
  advance(1_000);
  t.equal(ws.readyState, ws.OPEN, "a token not revoked stays");
  t.equal((await revokeWithSecret(g.url, APP, token)).status, 200);
  advance(1_000);
  await closedByGatehouse(t, g, end, 1008, "revoked");
});

/** What ends `ws` if it ends, after three echoes and a pause in which nothing must end it. */
async function endedSoon(ws: WebSocket): Promise<{ code: number } | undefined> {
  let end: { code: number } | undefined;
  const ending = closed(ws).then((closing) => (end = closing));
  for (let echo = 0; echo < 3 && end === undefined; echo++) {
    ws.send("ping");
    await Promise.race([nextMessage(ws), ending]);
  }
  await new Promise((done) => setTimeout(done, 200));
  return end;
}

t.test("a token whose exp is 40 days away keeps its connection open", async (t) => {
  // The process's own clock: a single Node timer of 40 days would fire after 1 ms.
  const g = await startTestGatehouse(await config([APP], { ttl: "40d" }));
  t.teardown(() => g.close());
  const token = await obtainToken(g.url, APP);
  const opened = await openWs(`${g.url.replace("http:", "ws:")}/ws`, {
    authorization: `Bearer ${token}`,
  });
  if (!("ws" in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`);
  const { ws } = opened;
  t.equal(await endedSoon(ws), undefined, "not closed");
  t.equal(ws.readyState, ws.OPEN);
  t.notOk(
    g.logs.some((line) => line.status === 101),
    "no connection ended, so none was logged",
  );
  ws.close();
});

/**
 * Reloads `g` with `yaml`, which accepts `gone`'s client no more: 1008 within the next check. The
 * client of `kept` is still accepted, and its connection stays.
 */
async function reloadCloses(
  t: Test,
  g: TestGatehouse,
  advance: (ms: number) => void,
  yaml: string,
  gone: WebSocket,
  kept: WebSocket,
): Promise<void> {
  const end = closed(gone);
  await g.writeConfig(yaml);
  t.equal(await g.gatehouse.reload("test"), "success");
  advance(1_000);
  if (!t.ok(await eventually(() => gone.readyState === gone.CLOSED), "closed")) return;
  await closedByGatehouse(t, g, end, 1008, "client_removed", 1);
  t.equal(await endedSoon(kept), undefined, "a client still accepted keeps its connection");
  kept.close();
}

t.test("a reload that removes a client: 1008 to its connections, not to others'", async (t) => {
  const { g, advance } = await gatehouse(t, [APP, OTHER]);
  const { ws } = await connect(g, APP);
  const { ws: other } = await connect(g, OTHER);
  await reloadCloses(t, g, advance, await config([OTHER]), ws, other);
});

t.test(
  "a reload that lists a client under a trusted issuer: 1008, its own tokens are refused",
  async (t) => {
    const { g, advance } = await gatehouse(t, [APP, OTHER]);
    const { ws } = await connect(g, APP);
    const { ws: other } = await connect(g, OTHER);
    // The provider is never asked: its keys are fetched in the background, and fail.
    const corp = `  trusted_issuers:
    - name: corp
      issuer: http://127.0.0.1:1
      jwks_uri: http://127.0.0.1:1/jwks
`;
    const moved = `  - id: ${APP.id}\n    issuer: corp\n`;
    const yaml = await config([OTHER], { tokens: corp, entries: moved });
    await reloadCloses(t, g, advance, yaml, ws, other);
  },
);

t.test("a reload that stops listing a trusted issuer's client: 1008", async (t) => {
  const resource = "https://api.example.com";
  const partner = { id: "partner-x", secret: "partner-secret", scope: "feed" };
  const provider = await startProvider({ resource, clients: [partner], scopes: ["feed"] });
  t.teardown(() => provider.close());
  // Without a plan for the issuer, a client it does not list is refused.
  const corp = `  trusted_issuers:
    - name: corp
      issuer: ${provider.issuer}
      audiences: [${resource}]
`;
  const clock = manualClock();
  const listed = `  - id: ${partner.id}\n    issuer: corp\n`;
  // The provider's tokens carry the time of day: gatehouse's starts there too.
  const start = Date.now();
  const g = await startTestGatehouse(await config([OTHER], { tokens: corp, entries: listed }), {
    clock,
    now: () => start + clock.monotonic(),
  });
  t.teardown(() => g.close());
  const ws = await openWith(g, await provider.token(partner));
  const { ws: other } = await connect(g, OTHER);
  const yaml = await config([OTHER], { tokens: corp });
  await reloadCloses(t, g, (ms) => clock.advance(ms), yaml, ws, other);
});

t.test("shutdown: 1001 to both sides at the end of the grace period", async (t) => {
  const { g } = await gatehouse(t);
  const { ws } = await connect(g);
  const end = closed(ws);
  const stopping = g.gatehouse.shutdown();
  t.equal((await end).code, 1001, "the client got 1001");
  t.ok(await eventually(() => upstream.closes.includes(1001)), "the upstream got 1001");
  await stopping;
  const line = await g.logged((entry) => entry.status === 101);
  t.match(line, { closedBy: "gatehouse", closeReason: "shutdown" });
});

t.test("a client that never reads holds the upstream back, not gatehouse's memory", async (t) => {
  const { g } = await gatehouse(t);
  const { ws } = await connect(g);
  const server = [...upstream.wss.clients].at(-1) as WebSocket;
  // The client stops reading: its socket's buffers fill, then gatehouse's, then the upstream's.
  (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
  const chunk = Buffer.alloc(64 * 1024, 1);
  let sent = 0;
  // The upstream writes while its own socket takes it: once gatehouse stops reading, it stops.
  const pump = (): void => {
    while (sent < 512 * 1024 * 1024 && server.bufferedAmount < 4 * 1024 * 1024) {
      server.send(chunk, { binary: true, compress: false });
      sent += chunk.length;
    }
  };
  pump();
  const stalled = await eventually(async () => {
    const before = sent;
    await new Promise((done) => setTimeout(done, 200));
    pump();
    return server.bufferedAmount >= 4 * 1024 * 1024 && sent === before;
  });
  t.ok(stalled, "the upstream's writes back up");
  t.ok(sent < 256 * 1024 * 1024, `what left the upstream stays bounded (${sent} bytes)`);
  let received = 0;
  ws.on("message", (data: Buffer) => (received += data.length));
  (ws as unknown as { _socket: { resume(): void } })._socket.resume();
  t.ok(await eventually(() => received >= sent), "once it reads, every byte arrives");
  ws.terminate();
});
