/**
 * Open WebSockets have a cap of their own, `upstream.websocket.max_connections`, and no longer
 * count against `max_connections`: a route whose plan bounds no `connections` cannot open more
 * sockets than that cap, a handshake over it is refused 503 with Retry-After, an open WebSocket is
 * never closed to make room, and however many are open, plain requests (health probes among them)
 * are still served.
 */
import t from "tap";
import type { WebSocket } from "ws";
import { startTestGatehouse } from "./helpers/gatehouse.js";
import { send } from "./helpers/client.js";
import { closed, openWs, startWsUpstream, untilOpen } from "./helpers/websocket.js";

const upstream = await startWsUpstream();
t.teardown(() => upstream.close());

const gh = await startTestGatehouse(`upstream:
  url: ${upstream.url}
  timeout: 2s
  websocket:
    max_connections: 2
shutdown:
  grace: 2s
max_connections: 2
plans:
  anonymous:
    rate_limit: { limit: 1000, window: 1h }
routes:
  - path: /ws
    methods: [GET]
    auth: none
    websocket: true
`);
t.teardown(() => gh.close());
const url = `${gh.url.replace("http:", "ws:")}/ws`;

/** Opens a WebSocket through gatehouse; a refusal fails the test. */
async function openNow(): Promise<WebSocket> {
  const opened = await openWs(url);
  if (!("ws" in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`);
  return opened.ws;
}

t.test("open WebSockets fill their own cap, not max_connections", async (t) => {
  const first = await openNow();
  const second = await openNow();
  t.equal(upstream.handshakes.length, 2);

  const refused = await openWs(url);
  t.match(refused, { status: 503, headers: { "retry-after": "5" } }, "over the cap: 503");
  if ("body" in refused) t.match(JSON.parse(refused.body), { error: "temporarily_unavailable" });
  t.equal(upstream.handshakes.length, 2, "nothing of it reached the upstream");
  t.equal(first.readyState, first.OPEN, "no open WebSocket was closed to make room");
  t.equal(second.readyState, second.OPEN);

  // max_connections is 2 and two WebSockets are open: plain requests still get in.
  for (let i = 0; i < 3; i++) {
    const health = await send(`${gh.url}/healthz`);
    t.equal(health.status, 200, "a health probe on the public listener is answered");
  }

  first.close(1000);
  await closed(first);
  // The place is free once gatehouse has seen the close; until then a handshake is refused.
  const third = await untilOpen(url);
  t.equal(upstream.handshakes.length, 3, "once one closes, a new WebSocket is served");
  for (const ws of [second, third]) {
    ws.close(1000);
    await closed(ws);
  }
});
