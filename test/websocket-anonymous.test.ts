/**
 * The anonymous plan's `connections` when the file leaves it out: 16 open WebSockets per client
 * address on `auth: none` routes, which need no credential, so that one address cannot hold every
 * connection the process has. `/config` shows the value in force.
 */
import t from "tap";
import type { WebSocket } from "ws";
import { eventually, json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { closed, openWs, startWsUpstream } from "./helpers/websocket.js";

const upstream = await startWsUpstream();
t.teardown(() => upstream.close());

const ROUTE = `routes:
  - path: /ws
    methods: [GET]
    auth: none
    websocket: true
`;

/** An anonymous plan with `extra` lines, in front of the WebSocket route. */
const withAnonymous = (extra = ""): string =>
  configFor(
    upstream.url,
    `plans:\n  anonymous:\n    rate_limit: { limit: 1000, window: 1h }\n${extra}${ROUTE}`,
  );

t.test("without connections: 16 WebSockets from one address, the 17th is 429", async (t) => {
  const gh = await startTestGatehouse(withAnonymous());
  t.teardown(() => gh.close());
  const url = `${gh.url.replace("http:", "ws:")}/ws`;
  const open: WebSocket[] = [];
  t.teardown(() => {
    for (const ws of open) ws.terminate();
  });
  for (let i = 1; i <= 16; i++) {
    const opened = await openWs(url);
    if (!("ws" in opened)) throw new Error(`WebSocket ${i} refused: ${opened.status}`);
    open.push(opened.ws);
  }
  const before = upstream.handshakes.length;
  const refused = await openWs(url);
  t.match(refused, { status: 429 }, "the 17th from the same address");
  if ("body" in refused) {
    t.match(JSON.parse(refused.body), {
      error: "rate_limited",
      policy: "connections",
      limit: 16,
    });
  }
  t.equal(upstream.handshakes.length, before, "its handshake never reached the upstream");

  const config = json(await send(`${gh.adminUrl}/config`)) as {
    plans: { anonymous: { connections: unknown } };
  };
  t.equal(config.plans.anonymous.connections, 16, "/config shows the value in force");

  const first = open.shift() as WebSocket;
  const gone = closed(first);
  first.close();
  await gone;
  t.ok(
    await eventually(async () => {
      const again = await openWs(url);
      if ("ws" in again) open.push(again.ws);
      return "ws" in again;
    }),
    "a closed one's slot is free again",
  );
});

t.test("a connections the file sets is the bound, and /config shows it", async (t) => {
  const gh = await startTestGatehouse(withAnonymous("    connections: 1\n"));
  t.teardown(() => gh.close());
  const url = `${gh.url.replace("http:", "ws:")}/ws`;
  const first = await openWs(url);
  if (!("ws" in first)) throw new Error(`refused: ${first.status}`);
  t.teardown(() => first.ws.terminate());
  t.match(await openWs(url), { status: 429 }, "the second from the same address");
  const config = json(await send(`${gh.adminUrl}/config`)) as {
    plans: { anonymous: { connections: unknown } };
  };
  t.equal(config.plans.anonymous.connections, 1);
});
