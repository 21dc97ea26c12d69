/**
 * Tokens a browser can send (`routes[].token_from`): the `access_token` query parameter, a
 * `bearer.<token>` WebSocket subprotocol, or a cookie with the route's `origins`. Through real
 * sockets with the `ws` package's client and server: the token opens the door, never reaches the
 * upstream or the log, and a second token, a foreign Origin or a bound token is refused.
 */
import t, { type Test } from "tap";
import { json, send } from "./helpers/client.js";
import { dpopKey, dpopTokenRequest, proof } from "./helpers/dpop.js";
import { rawRequest } from "./helpers/raw.js";
import { APP, startTokenFromRig } from "./helpers/token-from.js";
import { nextMessage, openWs, type Opened } from "./helpers/websocket.js";

const SITE = "https://app.example.com";
const { g, upstream, token, ws: wsUrl, lastHandshake } = await startTokenFromRig(t, SITE);

function opened(t: Test, result: Opened) {
  if (!("ws" in result)) throw new Error(`refused: ${result.status} ${result.body}`);
  t.teardown(() => result.ws.terminate());
  return result;
}

function refusal(result: Opened): { status: number; error: unknown } {
  if ("ws" in result) {
    result.ws.terminate();
    return { status: 101, error: undefined };
  }
  return { status: result.status, error: (JSON.parse(result.body) as { error: unknown }).error };
}

t.test(
  "the access_token parameter opens a WebSocket; the upstream gets the rest of the query",
  async (t) => {
    const { ws } = opened(t, await openWs(wsUrl(`/feed?room=7&access_token=${token}&x=`)));
    const seen = lastHandshake();
    t.equal(seen.url, "/feed?room=7&x=", "only the parameter is gone, the rest in its order");
    t.equal(seen.headers["x-client-id"], APP.id, "the upstream knows the client");
    ws.send("hi");
    t.equal(String((await nextMessage(ws)).data), "hi", "frames pass");
    // A WebSocket's access log line is written when it closes.
    ws.close();
    const line = await g.logged((l) => l.path === "/feed" && l.status === 101);
    t.notOk(JSON.stringify(g.logs).includes(token), "no log line carries the token");
    t.notOk(String(line.path).includes("access_token"), "the access log's path has no query");
  },
);

t.test("a bearer.<token> subprotocol opens it; the client's other protocols go on", async (t) => {
  const { ws, headers } = opened(
    t,
    await openWs(wsUrl("/feed"), {}, [`bearer.${token}`, "chat.v2"]),
  );
  t.equal(lastHandshake().headers["sec-websocket-protocol"], "chat.v2", "the token entry is gone");
  t.equal(headers["sec-websocket-protocol"], "chat.v2", "the upstream's choice reaches the client");
  t.equal(ws.protocol, "chat.v2");
});

t.test("a handshake whose only protocol was the token gets a 101 without one", async (t) => {
  const answer = await rawRequest(
    g.port,
    "GET /feed HTTP/1.1\r\nHost: gatehouse\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
      `Sec-WebSocket-Protocol: bearer.${token}\r\n\r\n`,
  );
  t.equal(answer.status, 101);
  t.equal(answer.headers["sec-websocket-protocol"], undefined, "no protocol in the 101");
  t.equal(lastHandshake().headers["sec-websocket-protocol"], undefined, "none upstream either");
});

t.test("a token in the route's cookie, from a page of a listed site", async (t) => {
  const cookie = `theme=dark; gh_token=${token}; lang=fr`;
  opened(t, await openWs(wsUrl("/session"), { cookie, origin: SITE }));
  t.equal(lastHandshake().headers.cookie, "theme=dark; lang=fr", "only that cookie is gone");
  const only = await send(`${g.url}/session`, {
    headers: { cookie: `gh_token=${token}`, origin: SITE },
  });
  t.equal(only.status, 200, "plain requests read it too");
  t.equal(upstream.plain.at(-1)?.headers.cookie, undefined, "no Cookie field is left");
});

t.test("a cookie's token needs a listed Origin: 403 origin_not_allowed otherwise", async (t) => {
  const cookie = `gh_token=${token}`;
  const handshakes = upstream.handshakes.length;
  t.same(
    refusal(await openWs(wsUrl("/session"), { cookie })),
    {
      status: 403,
      error: "origin_not_allowed",
    },
    "without an Origin",
  );
  t.same(
    refusal(await openWs(wsUrl("/session"), { cookie, origin: "https://evil.example" })),
    {
      status: 403,
      error: "origin_not_allowed",
    },
    "from another site",
  );
  const plain = await send(`${g.url}/session`, { method: "POST", headers: { cookie } });
  t.same([plain.status, json(plain).error], [403, "origin_not_allowed"], "a plain request too");
  t.equal(upstream.handshakes.length, handshakes, "nothing reached the upstream");
});

t.test(
  "origins on a WebSocket route: a foreign page is refused, a client without a browser passes",
  async (t) => {
    const bearer = { authorization: `Bearer ${token}` };
    opened(t, await openWs(wsUrl("/sites"), bearer));
    opened(t, await openWs(wsUrl("/sites"), { ...bearer, origin: SITE }));
    t.same(
      refusal(await openWs(wsUrl("/sites"), { ...bearer, origin: "http://app.example.com" })),
      {
        status: 403,
        error: "origin_not_allowed",
      },
      "the scheme is part of the origin",
    );
  },
);

t.test("a request carrying more than one token is 400 invalid_request", async (t) => {
  const bearer = { authorization: `Bearer ${token}` };
  const cases: Array<[string, Promise<Opened>]> = [
    ["header and query", openWs(wsUrl(`/feed?access_token=${token}`), bearer)],
    ["two parameters", openWs(wsUrl(`/feed?access_token=${token}&access_token=${token}`))],
    [
      "query and subprotocol",
      openWs(wsUrl(`/feed?access_token=${token}`), {}, [`bearer.${token}`]),
    ],
    ["two subprotocols", openWs(wsUrl("/feed"), {}, [`bearer.${token}`, `bearer.x${token}`])],
    [
      "two cookies",
      openWs(wsUrl("/session"), { cookie: `gh_token=${token}; gh_token=${token}`, origin: SITE }),
    ],
  ];
  for (const [name, attempt] of cases) {
    t.same(refusal(await attempt), { status: 400, error: "invalid_request" }, name);
  }
});

t.test("an access_token parameter that is not valid percent-encoding is 400", async (t) => {
  const answer = await send(`${g.url}/feed?access_token=%E0%A4%A`);
  t.same([answer.status, json(answer).error], [400, "invalid_request"]);
});

t.test("a route that does not read the query still refuses a token there", async (t) => {
  const answer = await send(`${g.url}/plain?access_token=${token}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.same([answer.status, json(answer).error], [400, "invalid_request"]);
  const alone = await send(`${g.url}/plain?access_token=${token}`);
  t.equal(alone.status, 401, "and does not take it for a token");
});

t.test("a DPoP-bound token in the query or a cookie is 401 invalid_token", async (t) => {
  const key = await dpopKey();
  const nowS = Math.floor(Date.now() / 1000);
  const issued = await dpopTokenRequest(
    g.url,
    APP,
    await proof(key, { htm: "POST", htu: `${g.url}/oauth/token`, iat: nowS }),
  );
  t.equal(issued.status, 200, "a bound token");
  const bound = json(issued).access_token as string;
  t.same(
    refusal(await openWs(wsUrl(`/feed?access_token=${bound}`))),
    {
      status: 401,
      error: "invalid_token",
    },
    "query",
  );
  t.same(
    refusal(await openWs(wsUrl("/session"), { cookie: `gh_token=${bound}`, origin: SITE })),
    {
      status: 401,
      error: "invalid_token",
    },
    "cookie",
  );
});
