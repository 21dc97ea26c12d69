/**
 * DPoP on a WebSocket handshake, through real sockets with the `ws` package's client and server:
 * a WebSocket client names the URL it opened, so on a `websocket: true` route a proof's htu may
 * say `ws` or `wss` for `http` or `https` (RFC 6455 §3). A plain request's proof naming a ws URL,
 * and a handshake's on a route that serves it as plain HTTP, are refused, and the refusal is
 * logged with the URL the proof had to name. The clock is the test's.
 */
import { randomUUID } from "node:crypto";
import t from "tap";
import { send } from "./helpers/client.js";
import { dpopHeaders, dpopKey, ownSigningKey, proof } from "./helpers/dpop.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { closed, openWs, startWsUpstream, type Opened } from "./helpers/websocket.js";

const APP: TestClient = { id: "dashboard", secret: "5d41402abc4b2a76b9719d911017c592" };
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const NOW_S = NOW / 1000;
// The public URL: a proof's htu names it, whatever address the test connects to.
const API = "https://api.example.com";

const upstream = await startWsUpstream();
t.teardown(() => upstream.close());

const { pem, sign } = await ownSigningKey();
const KEY = await dpopKey();

/** A gatehouse on the test's clock whose route /ws has `websocket: true`, or not. */
async function gatehouse(websocket: boolean): Promise<TestGatehouse> {
  const yaml = configFor(
    upstream.url,
    `tokens:
  signing: { algorithm: EdDSA, key_file: ./signing.pem }
  audience: ${API}
${await clientsYaml([APP])}routes:
  - path: /ws
    methods: [GET]
    websocket: ${websocket}
`,
  );
  const started = await startTestGatehouse(yaml, {
    now: () => NOW,
    files: { "signing.pem": pem },
  });
  t.teardown(() => started.close());
  return started;
}

const sockets = await gatehouse(true);
const plain = await gatehouse(false);

/** An own token for APP bound to KEY. */
const token = (): Promise<string> =>
  sign({
    iss: "gatehouse",
    aud: API,
    sub: APP.id,
    client_id: APP.id,
    iat: NOW_S,
    exp: NOW_S + 3600,
    jti: randomUUID(),
    cnf: { jkt: KEY.jkt },
  });

/** KEY's proof of a GET of `htu` with `bound`. */
const proofOf = (bound: string, htu: string) =>
  proof(KEY, { htm: "GET", htu, iat: NOW_S, token: bound });

/** Opens a WebSocket to /ws of `g` with `bound` and its proof `dpop`. */
const handshake = (g: TestGatehouse, bound: string, dpop: string): Promise<Opened> =>
  openWs(`${g.url.replace("http:", "ws:")}/ws`, dpopHeaders(bound, dpop));

/** Closes an opened socket; throws, with its answer, when it was refused. */
async function opened(answer: Opened): Promise<void> {
  if (!("ws" in answer)) throw new Error(`refused: ${answer.status} ${answer.body}`);
  const end = closed(answer.ws);
  answer.ws.close(1000);
  await end;
}

/** The refused answer's status, the access log's reason and the refused proof's log line. */
async function refusal(g: TestGatehouse, answer: { status: number; headers: object }) {
  const id = (answer.headers as Record<string, unknown>)["x-request-id"];
  const access = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
  const line = await g.logged(
    (entry) => entry.requestId === id && entry.msg === "DPoP proof refused",
  );
  return { status: answer.status, reason: access.reason, expectedHtu: line.expectedHtu };
}

const HTU_REFUSED = { status: 401, reason: "bearer_dpop_htu", expectedHtu: `${API}/ws` };

t.test("on a WebSocket route, a handshake's proof may name its URL in wss", async (t) => {
  for (const htu of [`wss://api.example.com/ws`, `WSS://API.example.com:443/ws`, `${API}/ws`]) {
    const bound = await token();
    const before = upstream.handshakes.length;
    await opened(await handshake(sockets, bound, await proofOf(bound, htu)));
    t.equal(upstream.handshakes.length, before + 1, `${htu}: the socket opened`);
    t.notOk("dpop" in (upstream.handshakes.at(-1)?.headers ?? {}), `${htu}: no proof upstream`);
  }
});

t.test("the same proof is refused on a plain route, and on a plain request", async (t) => {
  const bound = await token();
  const dpop = await proofOf(bound, `wss://api.example.com/ws`);
  const before = upstream.handshakes.length + upstream.plain.length;
  // A route without websocket: true serves the handshake as a plain request.
  const onPlainRoute = await handshake(plain, bound, dpop);
  if ("ws" in onPlainRoute) throw new Error("a socket opened on a plain route");
  t.strictSame(await refusal(plain, onPlainRoute), HTU_REFUSED, "a handshake on a plain route");
  const request = await send(`${sockets.url}/ws`, { headers: dpopHeaders(bound, dpop) });
  t.strictSame(await refusal(sockets, request), HTU_REFUSED, "a plain request on the route");
  t.equal(upstream.handshakes.length + upstream.plain.length, before, "neither reached it");
  // Refused proofs are not held: the proof opens its socket where it was made for.
  await opened(await handshake(sockets, bound, dpop));
});

t.test("ws stands for http only: a client that used https names wss", async (t) => {
  const bound = await token();
  const answer = await handshake(sockets, bound, await proofOf(bound, "ws://api.example.com/ws"));
  if ("ws" in answer) throw new Error("a socket opened with a ws URL for an https one");
  t.strictSame(await refusal(sockets, answer), HTU_REFUSED);
});
