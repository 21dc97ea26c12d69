/**
 * docs/errors.md and the bodies gatehouse writes agree: every code of its Errors table is made
 * through a real socket, and each answer has a status the table lists for its code, a JSON body
 * with that `error`, and the human text the table promises: `message`, or RFC 6749's
 * `error_description` from the token and revocation endpoints. No code of the table is left
 * unproduced.
 */
import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import type { IncomingMessage, ServerResponse } from "node:http";
import t, { type Test } from "tap";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { send, eventually } from "./helpers/client.js";
import { configFor, memoryLogger, startTestGatehouse } from "./helpers/gatehouse.js";
import { readManual, section } from "./helpers/docs.js";
import { refusingPort } from "./helpers/ports.js";
import { parseResponse, rawRequest } from "./helpers/raw.js";
import { clientsYaml, form, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { createEntry } from "../src/core/entry.js";
import type { Services } from "../src/core/services.js";
import { createPublicServer } from "../src/http/public-server.js";
import { createRequestIds } from "../src/http/request-ids.js";
import { createTraceIds } from "../src/http/trace-context.js";
import { createLifecycle } from "../src/lifecycle/drain.js";
import { createMetrics } from "../src/metrics.js";
import { systemClock } from "../src/clock.js";

/** The Errors table: each code's statuses (one, but for the DPoP codes' two). */
const TABLE = new Map<string, number[]>();
for (const row of section(readManual("docs/errors.md"), "Errors").matchAll(
  /^\| (\d{3})\s*\| `([a-z_]+)`/gm,
)) {
  const code = row[2] as string;
  TABLE.set(code, [...(TABLE.get(code) ?? []), Number(row[1])]);
}

/** An answer as the checks read it, from the client helper or a raw exchange. */
interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

const produced = new Set<string>();

/**
 * Checks that `answer` is the table's answer for `code`: its status, a JSON body naming the code,
 * and a non-empty `message` (`error_description` where `oauth`, the token endpoints' bodies).
 */
function tableAnswer(t: Test, code: string, answer: Answer, oauth = false): void {
  produced.add(code);
  t.ok(TABLE.has(code), `${code} is in the table`);
  t.ok(
    TABLE.get(code)?.includes(answer.status),
    `${code}: a status of the table's (${answer.status})`,
  );
  t.match(answer.headers["content-type"], /^application\/json/, `${code}: JSON`);
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  t.equal(body.error, code, `${code}: the body's error`);
  const text = oauth ? "error_description" : "message";
  t.match(body[text], /\S/, `${code}: ${text}`);
}

const fromClient = (response: Awaited<ReturnType<typeof send>>): Answer => ({
  status: response.status,
  headers: response.headers,
  body: response.body.toString("utf8"),
});

/** Writes `head` and reads the answer gatehouse gives before it closes the connection. */
function untilClosed(port: number, head: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(parseResponse(text)));
    socket.write(head);
  });
}

const READER: TestClient = {
  id: "reader",
  secret: "reader-secret-0123456789abcdef",
  extra: ["scopes: [items:read]", "plan: tight"],
};
const PLAIN: TestClient = { id: "plain", secret: "plain-secret-0123456789abcdef01" };
const OPEN_ROUTE = "routes:\n  - path: /open\n    methods: [GET]\n    auth: none\n";
const closed = await refusingPort();
const PROVIDER = `http://127.0.0.1:${closed}/realms/corp`;

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `tokens:
  scopes: [items:read, items:write]
  trusted_issuers:
    - name: corp
      issuer: ${PROVIDER}
      jwks_uri: http://127.0.0.1:${closed}/certs
      plan: tight
${await clientsYaml([READER])}plans:
  tight:
    rate_limit: { limit: 1, window: 1h }
  anonymous:
    quota: { limit: 1, period: day }
routes:
  - path: /v1/items
    methods: [GET]
  - path: /v1/write
    methods: [GET]
    scopes: [items:write]
  - path: /v1/session
    methods: [GET]
    token_from: [{ cookie: session }]
    origins: [https://app.example.com]
  - path: /open
    methods: [GET]
    auth: none
`,
  ),
  {
    adminListen: { host: "0.0.0.0", port: 0 },
    clientTimeouts: { headersMs: 15_000, tokenBodyMs: 300 },
  },
);
t.teardown(() => g.close());

const tokenRequest = (pairs: Array<[string, string]>, headers: Record<string, string> = {}) =>
  send(`${g.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: form(pairs),
  });
const asReader: Array<[string, string]> = [
  ["client_id", READER.id],
  ["client_secret", READER.secret],
];

t.test("the token endpoint's answers", async (t) => {
  const cases: Array<[string, Array<[string, string]>]> = [
    [
      "invalid_request",
      [...asReader, ["grant_type", "client_credentials"], ["scope", "a"], ["scope", "b"]],
    ],
    ["unsupported_grant_type", [...asReader, ["grant_type", "password"]]],
    ["invalid_scope", [...asReader, ["scope", "items:write"]]],
    ["invalid_target", [...asReader, ["resource", "https://elsewhere.example"]]],
    [
      "invalid_client",
      [
        ["client_id", READER.id],
        ["client_secret", "wrong"],
      ],
    ],
  ];
  for (const [code, pairs] of cases) {
    tableAnswer(t, code, fromClient(await tokenRequest(pairs)), true);
  }
  const big = await send(`${g.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "x".repeat(9000),
  });
  tableAnswer(t, "payload_too_large", fromClient(big), true);
  const slow = await untilClosed(
    g.port,
    "POST /oauth/token HTTP/1.1\r\nHost: a.test\r\n" +
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ngrant",
  );
  tableAnswer(t, "request_timeout", slow, true);
});

t.test("the token endpoint's DPoP answers", async (t) => {
  const malformed = await tokenRequest(asReader, { dpop: "not-a-proof" });
  tableAnswer(t, "invalid_dpop_proof", fromClient(malformed), true);
  t.equal(malformed.status, 400, "400 at the token endpoint");
  // With nonces required, a proof that passes every other check is answered with the nonce.
  const nonced = await startTestGatehouse(
    configFor(upstream.url, `tokens:\n  dpop: { nonce: true }\n${await clientsYaml([PLAIN])}`),
  );
  t.teardown(() => nonced.close());
  const { privateKey, publicKey } = await generateKeyPair("ES256");
  const proof = await new SignJWT({ htm: "POST", htu: `${nonced.url}/oauth/token` })
    .setProtectedHeader({ alg: "ES256", typ: "dpop+jwt", jwk: await exportJWK(publicKey) })
    .setJti(randomUUID())
    .setIssuedAt()
    .sign(privateKey);
  const answer = await send(`${nonced.url}/oauth/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", dpop: proof },
    body: form([
      ["client_id", PLAIN.id],
      ["client_secret", PLAIN.secret],
    ]),
  });
  tableAnswer(t, "use_dpop_nonce", fromClient(answer), true);
  t.equal(answer.status, 400, "400 at the token endpoint");
  t.match(answer.headers["dpop-nonce"], /^[A-Za-z0-9_-]+$/, "the nonce to use");
});

t.test("bearer routes' answers", async (t) => {
  tableAnswer(t, "unauthorized", fromClient(await send(`${g.url}/v1/items`)));
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  tableAnswer(t, "invalid_token", fromClient(await send(`${g.url}/v1/items`, bearer("abc"))));
  const token = await obtainToken(g.url, READER);
  const write = await send(`${g.url}/v1/write`, bearer(token));
  tableAnswer(t, "insufficient_scope", fromClient(write));
  const elsewhere = await send(`${g.url}/v1/session`, {
    headers: { origin: "https://evil.example" },
  });
  tableAnswer(t, "origin_not_allowed", fromClient(elsewhere));
  t.equal((await send(`${g.url}/v1/items`, bearer(token))).status, 200);
  const again = await send(`${g.url}/v1/items`, bearer(token));
  tableAnswer(t, "rate_limited", fromClient(again));
  // The provider's keys cannot be fetched: its token may be good, so 503, never 401.
  const { privateKey } = await generateKeyPair("RS256");
  const provided = await new SignJWT({ client_id: "partner" })
    .setProtectedHeader({ alg: "RS256", kid: "k1" })
    .setIssuer(PROVIDER)
    .setAudience("upstream")
    .setIssuedAt()
    .setExpirationTime("5m")
    .sign(privateKey);
  const waiting = await send(`${g.url}/v1/items`, bearer(provided));
  tableAnswer(t, "temporarily_unavailable", fromClient(waiting));
  t.match(waiting.headers["retry-after"], /^\d+$/);
});

t.test("the public listener's other answers", async (t) => {
  tableAnswer(t, "not_found", fromClient(await send(`${g.url}/nowhere`)));
  tableAnswer(t, "method_not_allowed", fromClient(await send(`${g.url}/open`, { method: "POST" })));
  tableAnswer(t, "invalid_path", fromClient(await send(`${g.url}/open%2Fx`)));
  t.equal((await send(`${g.url}/open`)).status, 200);
  tableAnswer(t, "quota_exceeded", fromClient(await send(`${g.url}/open`)));
  const raw = (head: string) => rawRequest(g.port, `${head}\r\nConnection: close\r\n\r\n`);
  tableAnswer(t, "invalid_request", await raw("GET /open HTTP/1.1\r\nHost: a\r\nHost: b"));
  tableAnswer(t, "uri_too_long", await raw(`GET /${"a".repeat(9000)} HTTP/1.1\r\nHost: a`));
  const fields = `GET /open HTTP/1.1\r\nHost: a\r\nX-Big: ${"b".repeat(17_000)}`;
  tableAnswer(t, "request_header_fields_too_large", await raw(fields));
  const gzip = "GET /open HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked";
  tableAnswer(t, "not_implemented", await raw(gzip));
  tableAnswer(t, "http_version_not_supported", await raw("GET /open HTTP/2.0\r\nHost: a"));
});

t.test("the admin listener's answers", async (t) => {
  const admin = `http://127.0.0.1:${g.gatehouse.adminAddress.port}`;
  const elsewhere = await send(`${admin}/metrics`, { headers: { host: "evil.example" } });
  tableAnswer(t, "misdirected_request", fromClient(elsewhere));
  // Reachable from other machines, without admin_token_env: operator paths are refused.
  tableAnswer(t, "admin_token_required", fromClient(await send(`${admin}/config`)));
});

t.test("an upstream that refuses or stays silent", async (t) => {
  const refusing = await startTestGatehouse(
    configFor(`http://127.0.0.1:${await refusingPort()}`, OPEN_ROUTE),
  );
  t.teardown(() => refusing.close());
  tableAnswer(t, "bad_gateway", fromClient(await send(`${refusing.url}/open`)));
  const silent = await startUpstream((_req: IncomingMessage, _res: ServerResponse) => undefined);
  t.teardown(() => silent.close());
  const waiting = await startTestGatehouse(
    configFor(silent.url, OPEN_ROUTE).replace("timeout: 2s", "timeout: 200ms"),
  );
  t.teardown(() => waiting.close());
  tableAnswer(t, "gateway_timeout", fromClient(await send(`${waiting.url}/open`)));
});

t.test("Redis that cannot be reached under on_outage: closed", async (t) => {
  const h = await startTestGatehouse(
    configFor(
      upstream.url,
      `limits:
  store: redis
  redis:
    url: redis://127.0.0.1:${await refusingPort()}
    on_outage: closed
    timeout: 200ms
plans:
  anonymous:
    rate_limit: { limit: 10, window: 1m }
${OPEN_ROUTE}`,
    ),
  );
  t.teardown(() => h.close());
  tableAnswer(t, "limits_unavailable", fromClient(await send(`${h.url}/open`)));
  t.ok(await eventually(async () => (await send(`${h.url}/readyz`)).status === 503));
  tableAnswer(t, "not_ready", fromClient(await send(`${h.url}/readyz`)));
});

// No request makes gatehouse fail on purpose: a stage that throws stands for a fault inside it,
// answered by the same entry and runner that serve every request.
t.test("a fault inside gatehouse", async (t) => {
  const { log } = memoryLogger();
  const services: Services = {
    log,
    metrics: createMetrics(),
    now: Date.now,
    clock: systemClock,
    newId: createRequestIds(),
    traceIds: createTraceIds(),
    lifecycle: createLifecycle(() => true),
  };
  const failing = () => {
    throw new Error("a fault");
  };
  const entry = createEntry(() => [failing], services);
  const server = createPublicServer(entry.handle, {
    headersMs: 15_000,
    maxConnections: () => 100,
    maxWebSockets: () => 100,
    now: Date.now,
    clock: systemClock,
    upgrade: () => false,
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  t.teardown(() => new Promise<void>((done) => server.close(() => done())));
  const port = (server.address() as { port: number }).port;
  tableAnswer(t, "internal_error", fromClient(await send(`http://127.0.0.1:${port}/`)));
});

t.test("every code of the table is one gatehouse produces", async (t) => {
  t.strictSame([...produced].sort(), [...TABLE.keys()].sort());
});
