/**
 * A WebSocket connection keeps its place among `max_connections` for as long as it is open, as
 * nginx counts an upgraded connection in `worker_connections`: a route whose plan bounds no
 * `connections` still cannot open more sockets than the cap, and an open WebSocket, never idle,
 * is never closed to make room.
 */
import t from "tap";
import type { WebSocket } from "ws";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { open, untilClosed } from "./helpers/pipeline.js";
import { closed, openWs, startWsUpstream, untilOpen } from "./helpers/websocket.js";

const upstream = await startWsUpstream();
t.teardown(() => upstream.close());

const gh = await startTestGatehouse(
  configFor(
    upstream.url,
    `max_connections: 2
plans:
  anonymous:
    rate_limit: { limit: 1000, window: 1h }
routes:
  - path: /ws
    methods: [GET]
    auth: none
    websocket: true
`,
  ),
);
t.teardown(() => gh.close());
const url = `${gh.url.replace("http:", "ws:")}/ws`;

/** Opens a WebSocket through gatehouse; a refusal fails the test. */
async function openNow(): Promise<WebSocket> {
  const opened = await openWs(url);
  if (!("ws" in opened)) throw new Error(`refused: ${opened.status} ${opened.body}`);
  return opened.ws;
}

t.test("open WebSockets fill max_connections; one closing makes room", async (t) => {
  const first = await openNow();
  const second = await openNow();
  t.equal(upstream.handshakes.length, 2);

  const refused = await open(gh.port);
  const refusedText = untilClosed(refused);
  refused.write("GET /ws HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n");
  t.equal(await refusedText, "", "at the cap, a new connection is closed without a byte");
  t.equal(upstream.handshakes.length, 2, "nothing of it reached the upstream");
  t.equal(first.readyState, first.OPEN, "no open WebSocket was closed to make room");
  t.equal(second.readyState, second.OPEN);

  first.close(1000);
  await closed(first);
  // The place is free once gatehouse has seen the close; until then a new connection is closed
  // unanswered.
  const third = await untilOpen(url);
  t.equal(upstream.handshakes.length, 3, "once one closes, a new WebSocket is served");
  for (const ws of [second, third]) {
    ws.close(1000);
    await closed(ws);
  }
});
