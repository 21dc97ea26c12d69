/**
 * Routes by method through real sockets (docs/configuration.md, routes): entries of one path with
 * disjoint methods, each with its own auth, scopes and cost; a method none of them lists is 405
 * with every method they allow in Allow; entries of one path sharing a method are refused by
 * `check`, at start and on a reload.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { runCli } from "./helpers/cli.js";
import { json, send, type ClientResponse } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const client = (id: string, scopes: string): TestClient => ({
  id,
  secret: `${id}-secret-0123456789abcdef`,
  extra: [`scopes: [${scopes}]`, "plan: standard"],
});
const READER = client("reader", "things:read");
const WRITER = client("writer", "things:read, things:write");

// Each path twice: GET anonymous or read, the writes bearer with their own scope and cost.
const ROUTES = `routes:
  - path: /v1/things
    methods: [GET]
    auth: none
  - path: /v1/things/*
    methods: [GET]
    scopes: [things:read]
  - path: /v1/things
    methods: [POST]
    scopes: [things:write]
    cost: 5
  - path: /v1/things/*
    methods: [PUT, DELETE]
    scopes: [things:write]
    cost: 3
`;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const yaml = configFor(
  upstream.url,
  `tokens:
  scopes: [things:read, things:write]
${await clientsYaml([READER, WRITER])}plans:
  standard:
    rate_limit: { limit: 100, window: 1h }
  anonymous:
    rate_limit: { limit: 50, window: 1h }
${ROUTES}`,
);
const g = await startTestGatehouse(yaml);
t.teardown(() => g.close());
const reader = await obtainToken(g.url, READER);
const writer = await obtainToken(g.url, WRITER);

function call(method: string, path: string, token?: string): Promise<ClientResponse> {
  const headers = token === undefined ? {} : { authorization: `Bearer ${token}` };
  return send(`${g.url}${path}`, { method, headers });
}

function remaining(response: ClientResponse): number {
  return Number(response.headers["x-ratelimit-remaining"]);
}

t.test("each entry of a path has its own auth, plan, scopes and cost", async (t) => {
  const anonymous = await call("GET", "/v1/things");
  t.equal(anonymous.status, 200, "GET is anonymous");
  t.equal(anonymous.headers["x-ratelimit-limit"], "50", "counted by the anonymous plan");
  t.equal(upstream.received.at(-1)?.headers["x-client-id"], undefined);

  t.equal((await call("POST", "/v1/things")).status, 401, "POST needs a token");
  const refused = await call("POST", "/v1/things", reader);
  t.equal(refused.status, 403);
  t.match(refused.headers["www-authenticate"], /error="insufficient_scope"/);
  t.match(refused.headers["www-authenticate"], /scope="things:write"/);
  const first = await call("POST", "/v1/things", writer);
  t.equal(first.status, 200, "the writer's token has the scope");
  t.equal(first.headers["x-ratelimit-limit"], "100", "counted by the client's plan");
  t.equal(upstream.received.at(-1)?.headers["x-client-id"], "writer");
  const second = await call("POST", "/v1/things", writer);
  t.equal(remaining(first) - remaining(second), 5, "POST costs 5");

  const read = await call("GET", "/v1/things/7", reader);
  t.equal(read.status, 200, "the reader reads one thing");
  t.equal((await call("GET", "/v1/things/7")).status, 401, "with a token");
  t.equal((await call("PUT", "/v1/things/7", reader)).status, 403, "but cannot write it");
  t.equal((await call("DELETE", "/v1/things/7", reader)).status, 403);
  const again = await call("GET", "/v1/things/7", reader);
  t.equal(remaining(read) - remaining(again), 1, "a GET costs 1; the refused writes nothing");
  const put = await call("PUT", "/v1/things/7", writer);
  t.equal(put.status, 200);
  const deleted = await call("DELETE", "/v1/things/7", writer);
  t.equal(deleted.status, 200);
  t.equal(remaining(put) - remaining(deleted), 3, "a write costs 3");
});

t.test("a method no entry of the path lists: 405, Allow naming all of theirs", async (t) => {
  const forwarded = upstream.received.length;
  for (const [method, path, allow] of [
    ["PATCH", "/v1/things", "GET, POST"],
    ["PATCH", "/v1/things/7", "GET, PUT, DELETE"],
    // HEAD is a method of its own, allowed only where an entry lists it.
    ["HEAD", "/v1/things", "GET, POST"],
  ] as const) {
    const answer = await call(method, path, writer);
    t.equal(answer.status, 405, `${method} ${path}`);
    t.equal(answer.headers.allow, allow);
    t.equal(answer.headers["x-ratelimit-limit"], undefined, "never counted");
    if (method !== "HEAD") t.equal(json(answer).error, "method_not_allowed");
  }
  t.equal(upstream.received.length, forwarded, "nothing reached the upstream");
});

// routes[2] shares POST with routes[0]: routes[2]'s POST could never be reached.
const OVERLAPPING = `upstream:
  url: http://127.0.0.1:3000
routes:
  - path: /v1/things
    methods: [GET, POST]
    auth: none
  - path: /v1/things
    methods: [PUT]
  - path: /v1/things
    methods: [POST, DELETE]
`;
const PROBLEM =
  "10:14 routes[2].methods: POST is also in routes[0] of the same path; " +
  "list each of a path's methods in one entry only";

t.test("check refuses entries of one path that share a method, naming both", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-routes-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, "overlapping.yaml");
  await writeFile(file, OVERLAPPING);
  const refused = await runCli(["check", "--config", file]);
  t.equal(refused.status, 1);
  t.equal(refused.stdout, "");
  t.equal(refused.stderr, `${file}:${PROBLEM}\n`);
  await writeFile(file, OVERLAPPING.replace("[POST, DELETE]", "[DELETE]"));
  const accepted = await runCli(["check", "--config", file]);
  t.equal(accepted.status, 0, "disjoint methods are accepted");
  t.match(accepted.stdout, /: ok \(3 routes,/);
});

t.test("a reload to entries that share a method keeps the routes in force", async (t) => {
  const hash = g.gatehouse.config().hash;
  await g.writeConfig(yaml.replace("    methods: [PUT, DELETE]", "    methods: [GET, PUT]"));
  t.equal(await g.gatehouse.reload("test"), "failure");
  t.equal(g.gatehouse.config().hash, hash);
  const failure = g.logs.find((line) => line.msg?.toString().startsWith("config reload failed"));
  t.match(failure?.problems, [/routes\[3\]\.methods: GET is also in routes\[1\] of the same path/]);
  t.equal((await call("DELETE", "/v1/things/7", writer)).status, 200, "DELETE is still allowed");
});
