/**
 * Spans exported over OTLP/HTTP to a real receiver started here: one SERVER span per request,
 * with the ids gatehouse logs and forwards and the HTTP semantic conventions' attributes; a
 * collector that refuses or never answers slows no request, and what cannot be sent is counted
 * in gatehouse_trace_spans_dropped_total.
 */
import t from "tap";
import { send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { sampleValue, scrape } from "./helpers/metrics.js";
import { attributesOf, startOtlpReceiver, type ReceivedSpan } from "./helpers/otlp-receiver.js";
import { refusingPort } from "./helpers/ports.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
// OTLP's enums: SPAN_KIND_SERVER and STATUS_CODE_ERROR.
const SPAN_KIND_SERVER = 2;
const STATUS_CODE_ERROR = 2;
const DROPPED = "gatehouse_trace_spans_dropped_total";

const upstream = await startUpstream((req, res) => {
  res.writeHead(req.url === "/v1/fail" ? 503 : 200, { "content-type": "application/json" });
  res.end("{}");
});
t.teardown(() => upstream.close());

async function config(tracing: string): Promise<string> {
  return configFor(
    upstream.url,
    `${await clientsYaml([APP])}plans:
  default:
    rate_limit: { limit: 1000, window: 1m }
routes:
  - path: /v1/items/*
    methods: [GET]
  - path: /v1/**
    methods: [GET]
    auth: none
tracing:
${tracing}`,
  );
}

function accessLine(g: TestGatehouse, requestId: unknown): Record<string, unknown> {
  const line = g.logs.find((l) => l.msg === "request" && l.requestId === requestId);
  if (line === undefined) throw new Error(`no access line for ${String(requestId)}`);
  return line;
}

function spanOf(spans: readonly ReceivedSpan[], spanId: unknown): ReceivedSpan {
  const found = spans.filter((s) => s.spanId === spanId);
  if (found.length !== 1) throw new Error(`${found.length} spans with id ${String(spanId)}`);
  return found[0] as ReceivedSpan;
}

// The dropped count as /metrics shows it; after a shutdown, from the same registry.
async function dropped(g: TestGatehouse, running: boolean): Promise<number> {
  const text = running ? await scrape(g) : await g.gatehouse.metrics.registry.metrics();
  return sampleValue(text, DROPPED);
}

t.test("one SERVER span per request reaches a collector that answers", async (t) => {
  const receiver = await startOtlpReceiver();
  t.teardown(() => receiver.close());
  const g = await startTestGatehouse(
    await config(`  otlp_endpoint: ${receiver.url}/\n  service_name: edge-gatehouse\n`),
  );
  const token = await obtainToken(g.url, APP);

  const continued = await send(`${g.url}/v1/items/42?secret=no`, {
    headers: {
      authorization: `Bearer ${token}`,
      traceparent: `00-${TRACE}-${PARENT}-01`,
      tracestate: "vendor=abc",
      "user-agent": "trace-test/1.0",
      host: "api.example.test:8443",
    },
  });
  const started = await send(`${g.url}/nowhere`);
  const failed = await send(`${g.url}/v1/fail`);
  const refused = await send(`${g.url}/v1/items/42`, {
    headers: { authorization: `Bearer ${token}x` },
  });
  t.strictSame(
    [continued.status, started.status, failed.status, refused.status],
    [200, 404, 503, 401],
  );
  const lines = [continued, started, failed, refused].map((r) =>
    accessLine(g, r.headers["x-request-id"]),
  );
  // Shutdown flushes the queue.
  await g.close();

  // The token request is a request too.
  t.equal(receiver.spans.length, 5, "one span per request, none lost");
  const [a, b, c, d] = lines.map((line) => spanOf(receiver.spans, line.spanId));
  for (const [span, line] of [
    [a, lines[0]],
    [b, lines[1]],
    [c, lines[2]],
  ] as const) {
    t.equal(span?.traceId, line?.traceId, "the trace id the access log has");
    t.equal(span?.kind, SPAN_KIND_SERVER);
    t.equal(span?.resource["service.name"], "edge-gatehouse");
    t.ok(BigInt(span?.endTimeUnixNano ?? 0) >= BigInt(span?.startTimeUnixNano ?? 1));
  }

  t.equal(a?.traceId, TRACE);
  t.equal(a?.parentSpanId, PARENT, "the caller's span is the parent");
  t.equal(a?.traceState, "vendor=abc");
  t.equal(a?.name, "GET /v1/items/*");
  t.match(attributesOf(a as ReceivedSpan), {
    "http.request.method": "GET",
    "url.path": "/v1/items/42",
    "url.scheme": "http",
    "http.route": "/v1/items/*",
    "http.response.status_code": 200,
    "server.address": "api.example.test",
    "server.port": 8443,
    "client.address": "127.0.0.1",
    "user_agent.original": "trace-test/1.0",
    "network.protocol.version": "1.1",
    "gatehouse.route": "/v1/items/*",
    "gatehouse.client_id": APP.id,
    "gatehouse.decision": "allowed",
  });
  t.equal(attributesOf(a as ReceivedSpan)["gatehouse.reason"], undefined, "nothing was refused");
  t.notMatch(JSON.stringify(a), "secret=no", "the query is not exported");
  t.not(a?.status?.code, STATUS_CODE_ERROR);

  t.equal(b?.parentSpanId ?? "", "", "a trace started here has no parent");
  t.equal(b?.name, "GET", "no route: the method alone");
  const bAttrs = attributesOf(b as ReceivedSpan);
  t.equal(bAttrs["http.route"], undefined);
  t.equal(bAttrs["http.response.status_code"], 404);
  t.equal(bAttrs["gatehouse.decision"], "none");
  t.not(b?.status?.code, STATUS_CODE_ERROR, "a 4xx is not a server error");

  t.equal(c?.status?.code, STATUS_CODE_ERROR, "a 5xx is");
  t.match(attributesOf(c as ReceivedSpan), {
    "http.response.status_code": 503,
    "error.type": "503",
  });

  t.equal(lines[3]?.reason, "bearer_signature", "the access log says why the token was refused");
  t.match(attributesOf(d as ReceivedSpan), {
    "http.response.status_code": 401,
    "gatehouse.reason": "bearer_signature",
  });
});

t.test("an unsampled trace exports nothing; a caller's sampled flag still does", async (t) => {
  const receiver = await startOtlpReceiver();
  t.teardown(() => receiver.close());
  const g = await startTestGatehouse(
    await config(`  otlp_endpoint: ${receiver.url}\n  sample_ratio: 0\n`),
  );
  await send(`${g.url}/v1/open`);
  await send(`${g.url}/v1/open`, { headers: { traceparent: `00-${TRACE}-${PARENT}-00` } });
  const sampled = await send(`${g.url}/v1/open`, {
    headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
  });
  const line = accessLine(g, sampled.headers["x-request-id"]);
  await g.close();
  t.strictSame(
    receiver.spans.map((s) => s.spanId),
    [line.spanId],
  );
});

t.test(
  "a collector that refuses connections: requests answered, spans dropped and counted",
  async (t) => {
    const port = await refusingPort();
    const g = await startTestGatehouse(
      await config(`  otlp_endpoint: http://127.0.0.1:${port}\n  timeout: 500ms\n`),
    );
    t.equal(await dropped(g, true), 0, "listed in /metrics from the start");
    const answers = await Promise.all(Array.from({ length: 5 }, () => send(`${g.url}/v1/open`)));
    t.strictSame(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200],
    );
    await g.close();
    t.equal(await dropped(g, false), 5, "every span that could not be sent");
  },
);

t.test("a collector that never answers holds no request", async (t) => {
  const receiver = await startOtlpReceiver();
  t.teardown(() => receiver.close());
  receiver.mode = "hold";
  const g = await startTestGatehouse(
    await config(`  otlp_endpoint: ${receiver.url}\n  timeout: 1h\n`),
  );
  t.equal((await send(`${g.url}/v1/open`)).status, 200);
  // The batch of that first span is posted and left unanswered.
  await receiver.postsReached(1);
  const held = receiver.held[0];

  const answers = await Promise.all(Array.from({ length: 20 }, () => send(`${g.url}/v1/open`)));
  t.ok(
    answers.every((a) => a.status === 200),
    "twenty requests answered while the export is stuck",
  );
  t.equal(receiver.posts, 1, "the exporter is still waiting on its first post");
  t.equal(held?.writableEnded, false, "which has had no answer");
  t.equal(await dropped(g, true), 0, "nothing dropped yet: the twenty wait in the queue");

  // The stuck post now fails for good; the collector answers from here on.
  receiver.mode = 200;
  receiver.release(400);
  await g.close();
  t.equal(await dropped(g, false), 1, "the span of the failed post");
  t.equal(receiver.spans.length, 21, "the twenty queued spans were delivered at shutdown");
});

t.test("a reload that changes tracing sends new spans to the new collector", async (t) => {
  const first = await startOtlpReceiver();
  const second = await startOtlpReceiver();
  t.teardown(async () => {
    await first.close();
    await second.close();
  });
  const g = await startTestGatehouse(await config(`  otlp_endpoint: ${first.url}\n`));
  const before = await send(`${g.url}/v1/open`);
  await g.writeConfig(await config(`  otlp_endpoint: ${second.url}\n`));
  t.equal(await g.gatehouse.reload(), "success");
  // The old exporter is shut down with its queue flushed.
  await first.postsReached(1);
  const after = await send(`${g.url}/v1/open`);
  await g.close();
  t.strictSame(
    first.spans.map((s) => s.spanId),
    [accessLine(g, before.headers["x-request-id"]).spanId],
  );
  t.strictSame(
    second.spans.map((s) => s.spanId),
    [accessLine(g, after.headers["x-request-id"]).spanId],
  );
});
