/**
 * Ambiguous request-targets and faulty framing through a real socket (docs/forwarding.md):
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

// [what is wrong, the target]. Every form below could name another resource to the upstream or
// to a filter in front of it than it names to gatehouse (docs/forwarding.md): 400 invalid_path,
// never forwarded.
const invalidPaths: Array<[string, string]> = [
  ["an empty segment", "//admin"],
  ["an empty segment", "//evil.example/admin"],
  ["an empty segment", "/api//v1"],
  ["a dot segment", "/api/./v1"],
  ["a dot segment", "/api/../admin"],
  ["a dot segment", "/api/.."],
  ["an encoded dot segment", "/api/%2e%2e/admin"],
  ["an encoded dot segment", "/api/%2E%2e/admin"],
  ["an encoded dot segment", "/api/.%2e/admin"],
  ["an encoded dot segment", "/api/%2e/v1"],
  ["an encoded slash or backslash", "/api/..%2fadmin"],
  ["an encoded slash or backslash", "/api/v1/%2fx"],
  ["an encoded slash or backslash", "/api/v1/%2Fx"],
  ["an encoded slash or backslash", "/api/v1/%5cx"],
  ["an encoded slash or backslash", "/api/v1/%5Cx"],
  ["a backslash", "/api\\..\\admin"],
  ["a backslash", "/api/v1\\x"],
  ["a dot segment with a matrix parameter", "/api/..;/admin"],
  ["a dot segment with a matrix parameter", "/api/.;x/v1"],
  ["a fragment", "/admin#x"],
  ["a fragment", "/api/v1#frag"],
  ["asterisk-form outside OPTIONS", "*"],
  ["an encoded control character", "/api/%00"],
  ["an encoded control character", "/api/%0A"],
  ["an encoded control character", "/api/%0d"],
  ["an encoded control character", "/api/%1F"],
  ["an encoded control character", "/api/%7f"],
  ["a bad percent-encoding", "/api/%zz"],
];

for (const [what, target] of invalidPaths) {
  t.test(`${what}, ${JSON.stringify(target)}, is 400 invalid_path`, async (t) => {
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

t.test("OPTIONS * is 400 invalid_path, not forwarded", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "OPTIONS * HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n\r\n",
  );
  t.equal(res.status, 400);
  t.equal((JSON.parse(res.body) as { error: string }).error, "invalid_path");
  t.equal(upstream.received.length, before);
});

t.test("CONNECT is never forwarded", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
  );
  t.not(res.status, 200, "no tunnel is opened");
  t.equal(upstream.received.length, before);
});

t.test("absolute-form is routed on its path; the authority is ignored", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("http://evil.example/v1/items?x=1"));
  t.equal(res.status, 200);
  t.equal(upstream.received.length, before + 1);
  const seen = upstream.received.at(-1);
  t.equal(seen?.url, "/v1/items?x=1");
  t.equal(seen?.headers.host, `127.0.0.1:${upstream.port}`, "the upstream gets its own Host");
});

t.test("absolute-form to a path outside the allowlist is 404", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("http://127.0.0.1/admin"));
  t.equal(res.status, 404);
  t.equal(upstream.received.length, before);
});

t.test("paths are case-sensitive", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("/V1/items"));
  t.equal(res.status, 404);
  t.equal((JSON.parse(res.body) as { error: string }).error, "not_found");
  t.equal(upstream.received.length, before);
});

t.test("a trailing slash is significant", async (t) => {
  const before = upstream.received.length;
  t.equal((await rawRequest(gh.port, get("/v1/items/"))).status, 404);
  t.equal(upstream.received.length, before);
});

t.test("matrix parameters inside a segment are forwarded unchanged", async (t) => {
  const res = await rawRequest(gh.port, get("/v1/items/x;jsessionid=1"));
  t.equal(res.status, 200);
  t.equal(upstream.received.at(-1)?.url, "/v1/items/x;jsessionid=1");
});

t.test("unreserved percent-encodings are decoded before routing and forwarding", async (t) => {
  const res = await rawRequest(gh.port, get("/v1/%69tems/%7Eme%c3%a9"));
  t.equal(res.status, 200);
  t.equal(upstream.received.at(-1)?.url, "/v1/items/~me%C3%A9");
});

t.test("two Host lines are 400", async (t) => {
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
  t.test(`an invalid Host ${JSON.stringify(host)} is 400`, async (t) => {
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

t.test("a request-target over 8 KiB is 414", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get(`/v1/items?q=${"a".repeat(10 * 1024)}`));
  t.equal(res.status, 414);
  t.equal((JSON.parse(res.body) as { error: string }).error, "uri_too_long");
  t.equal(upstream.received.length, before);
});

t.test("many small header fields are 431, not silently truncated", async (t) => {
  const before = upstream.received.length;
  let fields = "";
  for (let i = 0; i < 2500; i++) fields += `x-${i}: 1\r\n`;
  const res = await rawRequest(gh.port, get("/v1/items", fields));
  t.equal(res.status, 431);
  t.equal(upstream.received.length, before);
});

t.test("201 header fields are already 431", async (t) => {
  let fields = "";
  for (let i = 0; i < 198; i++) fields += `x-${i}: 1\r\n`;
  // With Host and Connection: 200 fields are served, one more is refused.
  t.equal((await rawRequest(gh.port, get("/v1/items", fields))).status, 200);
  const res = await rawRequest(gh.port, get("/v1/items", `${fields}x-last: 1\r\n`));
  t.equal(res.status, 431);
  t.equal((JSON.parse(res.body) as { error: string }).error, "request_header_fields_too_large");
});

t.test("HTTP/2.0 over a cleartext HTTP/1 connection is 505", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("/v1/items", "", "2.0"));
  t.equal(res.status, 505);
  t.equal(upstream.received.length, before);
});

t.test("HTTP/1.0 with Transfer-Encoding is 400 and closes", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(
    gh.port,
    "GET /v1/items HTTP/1.0\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  );
  t.equal(res.status, 400);
  t.equal(res.headers.connection, "close");
  t.equal(upstream.received.length, before);
});

t.test("an Expect other than 100-continue is 417", async (t) => {
  const before = upstream.received.length;
  const res = await rawRequest(gh.port, get("/v1/items", "Expect: foo\r\n"));
  t.equal(res.status, 417);
  t.equal(upstream.received.length, before);
});

t.test("the process serves normally after all of the above", async (t) => {
  const res = await rawRequest(gh.port, get("/v1/items"));
  t.equal(res.status, 200);
});
