import { Registry } from "prom-client";
import t from "tap";
import { RequestMetrics } from "../src/request-metrics.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { sampleValue, scrape } from "./helpers/metrics.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { revokeWithSecret } from "./helpers/assertions.js";
import { startUpstream } from "./helpers/upstream.js";

// The request metrics are kept outside prom-client's labelled metrics for speed; what a scrape
// reads must still be the Prometheus text format, with cumulative buckets.
t.test("requests, their durations and upstream durations render as Prometheus text", async (t) => {
  const registry = new Registry();
  const metrics = new RequestMetrics([0.01, 0.1, 1]);
  metrics.register(registry);
  metrics.request("/v1/items", 200, "allowed", 0.005);
  metrics.request("/v1/items", 200, "allowed", 0.05);
  metrics.request("/v1/items", 429, "rate_limited", 0.002);
  metrics.request("-", 404, "none", 2);
  metrics.upstreamResponse(0.01);
  metrics.upstreamResponse(0.5);
  const text = await registry.metrics();
  for (const line of [
    "# TYPE gatehouse_requests_total counter",
    'gatehouse_requests_total{route="/v1/items",status="200",decision="allowed"} 2',
    'gatehouse_requests_total{route="/v1/items",status="429",decision="rate_limited"} 1',
    'gatehouse_requests_total{route="-",status="404",decision="none"} 1',
    "# TYPE gatehouse_request_duration_seconds histogram",
    'gatehouse_request_duration_seconds_bucket{route="/v1/items",le="0.01"} 2',
    'gatehouse_request_duration_seconds_bucket{route="/v1/items",le="0.1"} 3',
    'gatehouse_request_duration_seconds_bucket{route="/v1/items",le="1"} 3',
    'gatehouse_request_duration_seconds_bucket{route="/v1/items",le="+Inf"} 3',
    'gatehouse_request_duration_seconds_sum{route="/v1/items"} 0.057',
    'gatehouse_request_duration_seconds_count{route="/v1/items"} 3',
    'gatehouse_request_duration_seconds_bucket{route="-",le="1"} 0',
    'gatehouse_request_duration_seconds_bucket{route="-",le="+Inf"} 1',
    'gatehouse_upstream_duration_seconds_bucket{le="0.01"} 1',
    'gatehouse_upstream_duration_seconds_bucket{le="0.1"} 1',
    'gatehouse_upstream_duration_seconds_bucket{le="1"} 2',
    "gatehouse_upstream_duration_seconds_count 2",
  ]) {
    t.ok(text.split("\n").includes(line), line);
  }
});

t.test("a registry reset clears the recorded requests", async (t) => {
  const registry = new Registry();
  const metrics = new RequestMetrics([1]);
  metrics.register(registry);
  metrics.request("/a", 200, "none", 0.1);
  metrics.upstreamResponse(0.1);
  registry.resetMetrics();
  const text = await registry.metrics();
  t.notMatch(text, /gatehouse_requests_total\{/);
  t.match(text, /^gatehouse_upstream_duration_seconds_count 0$/m);
});

// Token, revocation, JWKS and health requests have no route pattern; each of gatehouse's own endpoints has
// its own route value, so their traffic and latency are not lumped with 404s under "-".
t.test("gatehouse's own endpoints are counted and logged under their own route", async (t) => {
  const upstream = await startUpstream();
  t.teardown(() => upstream.close());
  const client = { id: "metrics-app", secret: "a-secret-for-the-route-label-test" };
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `${await clientsYaml([client])}routes:\n  - path: /v1/items\n    methods: [GET]\n`,
    ),
  );
  t.teardown(() => g.close());
  const token = await obtainToken(g.url, client);
  t.equal((await revokeWithSecret(g.url, client, token)).status, 200, "revoked");
  for (const path of ["/.well-known/jwks.json", "/healthz", "/readyz", "/nowhere"]) {
    await (await fetch(`${g.url}${path}`)).arrayBuffer();
  }
  const text = await scrape(g);
  for (const [route, status] of [
    ["token", "200"],
    ["revocation", "200"],
    ["jwks", "200"],
    ["liveness", "200"],
    ["readiness", "200"],
    ["-", "404"],
  ] as const) {
    t.equal(sampleValue(text, "gatehouse_requests_total", { route, status }), 1, route);
    t.equal(sampleValue(text, "gatehouse_request_duration_seconds_count", { route }), 1, route);
  }
  const routes = g.logs.filter((l) => l.msg === "request").map((l) => [l.path, l.route]);
  // Sorted by path: a line is written when its response closes, which need not be in order.
  t.strictSame(routes.sort(), [
    ["/.well-known/jwks.json", "jwks"],
    ["/healthz", "liveness"],
    ["/nowhere", "-"],
    ["/oauth/revoke", "revocation"],
    ["/oauth/token", "token"],
    ["/readyz", "readiness"],
  ]);
});
