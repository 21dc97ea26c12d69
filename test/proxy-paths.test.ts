/**
 * Ambiguous request-targets and faulty framing through a real socket (BAD_INPUTS.md section E):
 * each is refused before routing, and nothing reaches the upstream.
 */
import t from "tap";
import { rawRequest } from "./helpers/raw.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const upstream = await startUpstream();
const gh = await startTestGatehouse(
  configFor(
    upstream.url,
    `routes:
  - path: /v1/items
    methods: [GET]
    auth: none
  - path: /v1/items/*
    methods: [GET]
    auth: none
  - path: /api/**
    methods: [GET, OPTIONS]
    auth: none
`,
  ),
);
t.teardown(async () => {
  await gh.close();
  await upstream.close();
});

function get(target: string, extraHeaders = "", version = "1.1"): string {
  return `GET ${target} HTTP/${version}\r\nHost: gatehouse.test\r\n${extraHeaders}Connection: close\r\n\r\n`;
}

// Every form below is ambiguous (SPEC §4.5, §6): 400 invalid_path, never forwarded.
const invalidPaths: Array<[string, string]> = [
  ["E13", "//admin"],
  ["E13", "//evil.example/admin"],
  ["E13", "/api//v1"],
  ["E14", "/api/./v1"],
  ["E14", "/api/../admin"],
  ["E14", "/api/.."],
  ["E15", "/api/%2e%2e/admin"],
  ["E15", "/api/%2E%2e/admin"],
  ["E15", "/api/.%2e/admin"],
  ["E15", "/api/%2e/v1"],
  ["E16", "/api/..%2fadmin"],
  ["E16", "/api/v1/%2fx"],
  ["E16", "/api/v1/%2Fx"],
  ["E16", "/api/v1/%5cx"],
  ["E16", "/api/v1/%5Cx"],
  ["E17", "/api\\..\\admin"],
  ["E17", "/api/v1\\x"],
  ["E18", "/api/..;/admin"],
  ["E18", "/api/.;x/v1"],
  ["E21", "/admin#x"],
  ["E21", "/api/v1#frag"],
  ["E22", "*"],
  ["§6", "/api/%00"],
  ["§6", "/api/%0A"],
  ["§6", "/api/%0d"],
  ["§6", "/api/%1F"],
  ["§6", "/api/%7f"],
  ["§6", "/api/%zz"],
];

for (const [id, target] of invalidPaths) {
  t.test(`${id}: ${JSON.stringify(target)} is 400 invalid_path`, async (t) => {
    const before = upstream.received.length;
    const res = await rawRequest(gh.port, get(target));
    t.equal(res.status, 400);
    t.match(res.headers["content-type"], /^application\/json/);
    const body = JSON.parse(res.body) as { error: string; message: string };
    t.equal(body.error, "invalid_path");
    t.type(body.message, "string");
    t.ok(res.headers["x-request-id"], "even a 400 carries X-Request-Id");
    t.equal(upstream.received.length, before, "nothing reached the upstream");
  });
}

t.test("E22: OPTIONS * is 400 invalid_path, not forwarded", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "OPTIONS * HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n\r\n",
  );
  t.equal(res.status, 400);
  t.equal((JSON.parse(res.body) as { error: string }).error, "invalid_path");
  t.equal(upstream.received.length, before);
});

t.test("E22: CONNECT is never forwarded", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
  );
  t.not(res.status, 200, "no tunnel is opened");
  t.equal(upstream.received.length, before);
});

t.test("E12: absolute-form is routed on its path; the authority is ignored", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("http://evil.example/v1/items?x=1"));
  t.equal(res.status, 200);
  t.equal(upstream.received.length, before + 1);
  const seen = upstream.received.at(-1);
  t.equal(seen?.url, "/v1/items?x=1");
  t.equal(seen?.headers.host, `127.0.0.1:${upstream.port}`, "the upstream gets its own Host");
});

t.test("E12: absolute-form to a path outside the allowlist is 404", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("http://127.0.0.1/admin"));
  t.equal(res.status, 404);
  t.equal(upstream.received.length, before);
});

t.test("E19: paths are case-sensitive", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("/V1/items"));
  t.equal(res.status, 404);
  t.equal((JSON.parse(res.body) as { error: string }).error, "not_found");
  t.equal(upstream.received.length, before);
});

t.test("E20: a trailing slash is significant", async (t) => {
  const before = upstream.received.length;
  t.equal((await rawRequest(gh.port, get("/v1/items/"))).status, 404);
  t.equal(upstream.received.length, before);
});

t.test("E18: matrix parameters inside a segment are forwarded unchanged", async (t) => {
  const res = await rawRequest(gh.port, get("/v1/items/x;jsessionid=1"));
  t.equal(res.status, 200);
  t.equal(upstream.received.at(-1)?.url, "/v1/items/x;jsessionid=1");
});

t.test("unreserved percent-encodings are decoded before routing and forwarding", async (t) => {
  const res = await rawRequest(gh.port, get("/v1/%69tems/%7Eme%c3%a9"));
  t.equal(res.status, 200);
  t.equal(upstream.received.at(-1)?.url, "/v1/items/~me%C3%A9");
});

t.test("E11: two Host lines are 400", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "GET /v1/items HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\nConnection: close\r\n\r\n",
  );
  t.equal(res.status, 400);
  t.equal((JSON.parse(res.body) as { error: string }).error, "invalid_request");
  t.equal(upstream.received.length, before);
});

for (const host of ["u@evil.test", "a b", "evil.test/x", "evil.test:80x"]) {
  t.test(`E11: an invalid Host ${JSON.stringify(host)} is 400`, async (t) => {
    const before = upstream.received.length;
    const res = await rawRequest(
      gh.port,
      `GET /v1/items HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    t.equal(res.status, 400);
    t.equal(upstream.received.length, before);
  });
}

for (const host of ["gatehouse.test:8080", "[::1]:8080", "127.0.0.1", "xn--caf-dma.test"]) {
  t.test(`a valid Host ${JSON.stringify(host)} is served`, async (t) => {
    const res = await rawRequest(
      gh.port,
      `GET /v1/items HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    t.equal(res.status, 200);
  });
}

t.test("E29: a request-target over 8 KiB is 414", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get(`/v1/items?q=${"a".repeat(10 * 1024)}`));
  t.equal(res.status, 414);
  t.equal((JSON.parse(res.body) as { error: string }).error, "uri_too_long");
  t.equal(upstream.received.length, before);
});

t.test("E30: many small header fields are 431, not silently truncated", async (t) => {
  const before = upstream.received.length;
  let fields = "";
  for (let i = 0; i < 2500; i++) fields += `x-${i}: 1\r\n`;
  const res = await rawRequest(gh.port, get("/v1/items", fields));
  t.equal(res.status, 431);
  t.equal(upstream.received.length, before);
});

t.test("E30: 201 header fields are already 431", async (t) => {
  let fields = "";
  for (let i = 0; i < 198; i++) fields += `x-${i}: 1\r\n`;
  // With Host and Connection: 200 fields are served, one more is refused.
  t.equal((await rawRequest(gh.port, get("/v1/items", fields))).status, 200);
  const res = await rawRequest(gh.port, get("/v1/items", `${fields}x-last: 1\r\n`));
  t.equal(res.status, 431);
  t.equal((JSON.parse(res.body) as { error: string }).error, "request_header_fields_too_large");
});

t.test("E37: HTTP/2.0 over a cleartext HTTP/1 connection is 505", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("/v1/items", "", "2.0"));
  t.equal(res.status, 505);
  t.equal(upstream.received.length, before);
});

t.test("E6: HTTP/1.0 with Transfer-Encoding is 400 and closes", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "GET /v1/items HTTP/1.0\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  );
  t.equal(res.status, 400);
  t.equal(res.headers.connection, "close");
  t.equal(upstream.received.length, before);
});

t.test("E35: an Expect other than 100-continue is 417", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("/v1/items", "Expect: foo\r\n"));
  t.equal(res.status, 417);
  t.equal(upstream.received.length, before);
});

t.test("the process serves normally after all of the above", async (t) => {
  const res = await rawRequest(gh.port, get("/v1/items"));
  t.equal(res.status, 200);
});
