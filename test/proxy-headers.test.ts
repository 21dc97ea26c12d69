/**
 * Header hygiene through real sockets: hop-by-hop fields and those named in Connection removed
 * both ways (RFC 9110 §7.6.1), forwarding claims overwritten unless a trusted proxy made them.
 */
import t from "tap";
import { send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { rawRequest } from "./helpers/raw.js";
import { startUpstream } from "./helpers/upstream.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET, POST]
    auth: none
`;

const upstream = await startUpstream();
const defaultHandler = upstream.handler;
const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
const trusting = await startTestGatehouse(
  configFor(upstream.url, `trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]\n${ROUTES}`),
);
const trustingOthers = await startTestGatehouse(
  configFor(upstream.url, `trusted_proxies: [10.0.0.0/8]\n${ROUTES}`),
);
t.teardown(async () => {
  await gh.close();
  await trusting.close();
  await trustingOthers.close();
  await upstream.close();
});

t.test("hop-by-hop request fields never reach the upstream", async (t) => {
  const res = await rawRequest(
    gh.port,
    "POST /v1/x HTTP/1.1\r\nHost: gatehouse.test\r\n" +
      "Connection: keep-alive, X-Named-One, x-named-two , Upgrade, HTTP2-Settings\r\n" +
      "X-Named-One: 1\r\nX-Named-Two: 2\r\nX-Kept: 3\r\n" +
      "Keep-Alive: timeout=99\r\nTE: trailers\r\nTrailer: X-Checksum\r\n" +
      "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n" +
      "Proxy-Anything: x\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n" +
      "Content-Length: 4\r\n\r\nbody",
  );
  t.equal(res.status, 200);
  const seen = upstream.received.at(-1);
  const names = Object.keys(seen?.headers ?? {});
  for (const name of [
    "x-named-one",
    "x-named-two",
    "keep-alive",
    "te",
    "trailer",
    "proxy-connection",
    "proxy-authorization",
    "proxy-anything",
    "upgrade",
    "http2-settings",
  ]) {
    t.notOk(names.includes(name), `${name} is not forwarded`);
  }
  t.notMatch(seen?.headers.connection ?? "", /named|upgrade|http2/i, "nor named in Connection");
  t.equal(seen?.headers["x-kept"], "3", "fields not named in Connection are kept");
  t.equal(seen?.body.toString(), "body");
});

t.test("Connection cannot remove the fields gatehouse sets", async (t) => {
  const res = await rawRequest(
    gh.port,
    "GET /v1/x HTTP/1.1\r\nHost: gatehouse.test\r\n" +
      "Connection: close, X-Forwarded-For, Via, X-Request-Id, X-Client-Id\r\n" +
      "X-Client-Id: admin\r\n\r\n",
  );
  t.equal(res.status, 200);
  const seen = upstream.received.at(-1)?.headers ?? {};
  t.equal(seen["x-forwarded-for"], "127.0.0.1");
  t.equal(seen.via, "1.1 gatehouse");
  t.equal(seen["x-request-id"], res.headers["x-request-id"]);
  t.equal(seen["x-client-id"], undefined, "an inbound identity header is removed");
});

t.test("Connection naming the framing fields does not break the body", async (t) => {
  const res = await rawRequest(
    gh.port,
    "POST /v1/x HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close, Content-Length\r\n" +
      "Content-Length: 5\r\n\r\nhello",
  );
  t.equal(res.status, 200);
  t.equal(upstream.received.at(-1)?.body.toString(), "hello");
  const chunked = await rawRequest(
    gh.port,
    "POST /v1/x HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close, Transfer-Encoding\r\n" +
      "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
  );
  t.equal(chunked.status, 200);
  t.equal(upstream.received.at(-1)?.body.toString(), "hello");
});

t.test("a request with a Trailer field is served normally (node-http-proxy#1647)", async (t) => {
  const res = await rawRequest(
    gh.port,
    "POST /v1/x HTTP/1.1\r\nHost: gatehouse.test\r\nTrailer: X-Checksum\r\n" +
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
      "5\r\nhello\r\n0\r\nX-Checksum: 42\r\n\r\n",
  );
  t.equal(res.status, 200);
  t.equal(upstream.received.at(-1)?.body.toString(), "hello");
  t.equal(upstream.received.at(-1)?.headers.trailer, undefined);
});

t.test("the Authorization header is not forwarded by default", async (t) => {
  await send(`${gh.url}/v1/x`, { headers: { authorization: "Bearer abc.def.ghi" } });
  t.equal(upstream.received.at(-1)?.headers.authorization, undefined);
});

t.test("hop-by-hop response fields never reach the client", async (t) => {
  upstream.handler = (_req, res) => {
    res.setHeader("connection", "keep-alive, X-Internal, x-debug");
    res.setHeader("x-internal", "secret");
    res.setHeader("x-debug", "trace");
    res.setHeader("keep-alive", "timeout=99, max=7");
    res.setHeader("proxy-authenticate", 'Basic realm="inner"');
    res.setHeader("proxy-connection", "keep-alive");
    res.setHeader("trailer", "X-Checksum");
    res.setHeader("upgrade", "h2c");
    res.setHeader("x-public", "ok");
    res.end("done");
  };
  t.teardown(() => void (upstream.handler = defaultHandler));
  const res = await rawRequest(
    gh.port,
    "GET /v1/x HTTP/1.1\r\nHost: gatehouse.test\r\nConnection: close\r\n\r\n",
  );
  t.equal(res.status, 200);
  t.match(res.body, /\bdone\b/);
  t.equal(res.headers["x-public"], "ok");
  for (const name of ["x-internal", "x-debug", "proxy-authenticate", "proxy-connection"]) {
    t.equal(res.headers[name], undefined, `${name} is not passed to the client`);
  }
  t.equal(res.headers.trailer, undefined);
  t.equal(res.headers.upgrade, undefined);
  t.notMatch(res.headers["keep-alive"] ?? "", /max=7/, "the upstream's Keep-Alive is not passed");
  t.notMatch(res.headers.connection ?? "", /internal|debug/i);
});

t.test("an upstream Connection naming a header gatehouse adds does not remove it", async (t) => {
  upstream.handler = (_req, res) => {
    res.setHeader("connection", "x-request-id");
    res.end("ok");
  };
  t.teardown(() => void (upstream.handler = defaultHandler));
  const res = await send(`${gh.url}/v1/x`, { headers: { "x-request-id": "rid-41" } });
  t.equal(res.headers["x-request-id"], "rid-41");
});

t.test("forwarding claims are overwritten without trusted_proxies", async (t) => {
  const res = await send(`${gh.url}/v1/x`, {
    headers: {
      host: "public.example",
      "x-forwarded-for": "6.6.6.6",
      "x-forwarded-proto": "https",
      "x-forwarded-host": "evil.example",
      forwarded: "for=6.6.6.6;proto=https",
      "x-real-ip": "6.6.6.6",
    },
  });
  t.equal(res.status, 200);
  const seen = upstream.received.at(-1)?.headers ?? {};
  t.equal(seen["x-forwarded-for"], "127.0.0.1", "the socket peer, not appended to the claim");
  t.equal(seen["x-forwarded-proto"], "http");
  t.equal(seen["x-forwarded-host"], "public.example", "from the client's Host");
  t.equal(seen.forwarded, undefined);
  t.equal(seen["x-real-ip"], undefined);
});

t.test("a peer outside trusted_proxies is not believed either", async (t) => {
  await send(`${trustingOthers.url}/v1/x`, {
    headers: { "x-forwarded-for": "6.6.6.6", "x-forwarded-proto": "https" },
  });
  const seen = upstream.received.at(-1)?.headers ?? {};
  t.equal(seen["x-forwarded-for"], "127.0.0.1");
  t.equal(seen["x-forwarded-proto"], "http");
});

t.test("without any claim, gatehouse sets X-Forwarded-*", async (t) => {
  await send(`${trusting.url}/v1/x`, { headers: { host: "public.example:8443" } });
  const seen = upstream.received.at(-1)?.headers ?? {};
  t.equal(seen["x-forwarded-for"], "127.0.0.1");
  t.equal(seen["x-forwarded-proto"], "http");
  t.equal(seen["x-forwarded-host"], "public.example:8443");
});

t.test("from a trusted proxy, the chain starts at the rightmost untrusted hop", async (t) => {
  await send(`${trusting.url}/v1/x`, {
    headers: {
      "x-forwarded-for": "6.6.6.6, 203.0.113.7, 10.0.0.5",
      "x-forwarded-proto": "https",
      "x-forwarded-host": "public.example",
    },
  });
  const seen = upstream.received.at(-1)?.headers ?? {};
  t.equal(
    seen["x-forwarded-for"],
    "203.0.113.7, 10.0.0.5, 127.0.0.1",
    "the hop the client wrote itself is dropped; the trusted ones and the peer stay",
  );
  t.equal(seen["x-forwarded-proto"], "https", "a trusted proxy's Proto is kept");
  t.equal(seen["x-forwarded-host"], "public.example", "a trusted proxy's Host is kept");
});

t.test("every hop trusted keeps the whole chain", async (t) => {
  await send(`${trusting.url}/v1/x`, { headers: { "x-forwarded-for": "10.1.1.1,10.0.0.5" } });
  t.equal(upstream.received.at(-1)?.headers["x-forwarded-for"], "10.1.1.1, 10.0.0.5, 127.0.0.1");
});

t.test("IPv4-mapped hops are folded to IPv4", async (t) => {
  await send(`${trusting.url}/v1/x`, {
    headers: { "x-forwarded-for": "::ffff:203.0.113.9, ::ffff:10.0.0.5" },
  });
  t.equal(upstream.received.at(-1)?.headers["x-forwarded-for"], "203.0.113.9, 10.0.0.5, 127.0.0.1");
});

t.test("a hop that is not an address ends what can be believed", async (t) => {
  await send(`${trusting.url}/v1/x`, { headers: { "x-forwarded-for": "203.0.113.7, garbage" } });
  t.equal(upstream.received.at(-1)?.headers["x-forwarded-for"], "127.0.0.1");
});
