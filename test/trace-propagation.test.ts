/**
 * W3C Trace Context through real sockets: a valid inbound traceparent is continued with
 * gatehouse's own span as the upstream's parent, a missing one starts a trace, an invalid one is
 * replaced (and its tracestate dropped); the access log carries the ids, also on gatehouse's own
 * answers.
 */
import t from "tap";
import { send } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { rawRequest } from "./helpers/raw.js";
import { startUpstream, type Received } from "./helpers/upstream.js";
import type { TraceIds } from "../src/http/trace-context.js";

const ROUTES = `routes:
  - path: /v1/**
    methods: [GET]
    auth: none
`;
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const FORWARDED = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

const upstream = await startUpstream();
const gh = await startTestGatehouse(configFor(upstream.url, ROUTES));
// Never samples a trace it starts: a caller's sampled flag is still kept (parent-based).
const unsampled = await startTestGatehouse(
  configFor(upstream.url, `${ROUTES}tracing:\n  sample_ratio: 0\n`),
);
t.teardown(async () => {
  await gh.close();
  await unsampled.close();
  await upstream.close();
});

// The one request the upstream received for `requestId`.
function receivedFor(requestId: string | string[] | undefined): Received {
  const found = upstream.received.filter((r) => r.headers["x-request-id"] === requestId);
  if (found.length !== 1) throw new Error(`${found.length} requests with id ${String(requestId)}`);
  return found[0] as Received;
}

function accessLine(g: TestGatehouse, requestId: unknown): Record<string, unknown> {
  const line = g.logs.find((l) => l.msg === "request" && l.requestId === requestId);
  if (line === undefined) throw new Error(`no access line for ${String(requestId)}`);
  return line;
}

// The traceparent lines the upstream received, as sent on the wire.
function traceparentLines(received: Received): string[] {
  return received.rawHeaders.filter(
    (_, i) => i % 2 === 1 && /^traceparent$/i.test(received.rawHeaders[i - 1] ?? ""),
  );
}

t.test("a valid traceparent is continued with gatehouse's span as the parent", async (t) => {
  const res = await send(`${gh.url}/v1/items`, {
    headers: { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: "vendor=abc,other=x:y" },
  });
  t.equal(res.status, 200);
  const received = receivedFor(res.headers["x-request-id"]);
  t.equal(traceparentLines(received).length, 1, "one traceparent, gatehouse's");
  const [, traceId, parentId, flags] = FORWARDED.exec(received.headers.traceparent as string) ?? [];
  t.equal(traceId, TRACE, "the caller's trace goes on");
  t.not(parentId, PARENT, "the upstream's parent is not the caller's span");
  t.equal(flags, "01", "the caller's sampled flag is kept");
  t.equal(received.headers.tracestate, "vendor=abc,other=x:y", "tracestate unchanged");
  const line = accessLine(gh, res.headers["x-request-id"]);
  t.equal(line.traceId, TRACE);
  t.equal(line.spanId, parentId, "the span logged is the parent the upstream received");
});

t.test("an unsampled caller's flag is kept too", async (t) => {
  const res = await send(`${unsampled.url}/v1/items`, {
    headers: { traceparent: `00-${TRACE}-${PARENT}-00` },
  });
  const forwarded = receivedFor(res.headers["x-request-id"]).headers.traceparent as string;
  t.match(forwarded, new RegExp(`^00-${TRACE}-[0-9a-f]{16}-00$`));
  const sampledCaller = await send(`${unsampled.url}/v1/items`, {
    headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
  });
  t.match(
    receivedFor(sampledCaller.headers["x-request-id"]).headers.traceparent,
    /-01$/,
    "sample_ratio 0 does not override a caller that sampled",
  );
});

t.test("without a traceparent gatehouse starts a trace", async (t) => {
  const res = await send(`${gh.url}/v1/items`, { headers: { tracestate: "orphan=1" } });
  const received = receivedFor(res.headers["x-request-id"]);
  const [, traceId, parentId, flags] = FORWARDED.exec(received.headers.traceparent as string) ?? [];
  t.ok(traceId !== undefined && parentId !== undefined, "a well-formed traceparent");
  t.equal(flags, "01", "sample_ratio 1 samples every trace started here");
  t.equal(received.headers.tracestate, undefined, "a tracestate without its trace is dropped");
  const line = accessLine(gh, res.headers["x-request-id"]);
  t.strictSame([line.traceId, line.spanId], [traceId, parentId]);

  const other = await send(`${gh.url}/v1/items`);
  t.not(accessLine(gh, other.headers["x-request-id"]).traceId, traceId, "each its own trace");

  const quiet = await send(`${unsampled.url}/v1/items`);
  t.match(receivedFor(quiet.headers["x-request-id"]).headers.traceparent, /-00$/);
});

t.test("an invalid traceparent is replaced, never forwarded, nor its tracestate", async (t) => {
  const invalid = [
    `00-${TRACE.toUpperCase()}-${PARENT}-01`,
    `00-${"0".repeat(32)}-${PARENT}-01`,
    `00-${TRACE}-${"0".repeat(16)}-01`,
    `ff-${TRACE}-${PARENT}-01`,
    `00-${TRACE}-${PARENT}-01-extra`,
  ];
  for (const traceparent of invalid) {
    const res = await send(`${gh.url}/v1/items`, {
      headers: { traceparent, tracestate: "vendor=abc" },
    });
    const received = receivedFor(res.headers["x-request-id"]);
    const lines = traceparentLines(received);
    t.equal(lines.length, 1, traceparent);
    const [, traceId] = FORWARDED.exec(lines[0] as string) ?? [];
    t.not(traceId, TRACE, `${traceparent}: a new trace`);
    t.not(lines[0], traceparent);
    t.equal(received.headers.tracestate, undefined, `${traceparent}: tracestate not forwarded`);
    t.equal(accessLine(gh, res.headers["x-request-id"]).traceId, traceId);
  }
});

t.test("two traceparent lines are invalid", async (t) => {
  const value = `00-${TRACE}-${PARENT}-01`;
  const res = await rawRequest(
    gh.port,
    `GET /v1/items HTTP/1.1\r\nHost: gatehouse.test\r\ntraceparent: ${value}\r\n` +
      `traceparent: ${value}\r\ntracestate: vendor=abc\r\nConnection: close\r\n\r\n`,
  );
  t.equal(res.status, 200);
  const received = receivedFor(res.headers["x-request-id"]);
  const lines = traceparentLines(received);
  t.equal(lines.length, 1);
  t.notMatch(lines[0], TRACE);
  t.equal(received.headers.tracestate, undefined);
});

t.test("gatehouse's own answers log their trace ids", async (t) => {
  for (const [path, status] of [
    ["/nowhere", 404],
    ["/v1//b", 400],
  ] as const) {
    const res = await send(`${gh.url}${path}`, {
      headers: { traceparent: `00-${TRACE}-${PARENT}-01` },
    });
    t.equal(res.status, status);
    const line = accessLine(gh, res.headers["x-request-id"]);
    t.equal(line.traceId, TRACE, `${status}: the caller's trace`);
    t.match(line.spanId, /^[0-9a-f]{16}$/, `${status}: gatehouse's span`);
  }
});

t.test("ids come from the injected source", async (t) => {
  let n = 0;
  const pinned: TraceIds = {
    traceId: () => `${"a".repeat(31)}${++n}`,
    spanId: () => `${"b".repeat(15)}${++n}`,
  };
  const g = await startTestGatehouse(configFor(upstream.url, ROUTES), { traceIds: pinned });
  t.teardown(() => g.close());
  const res = await send(`${g.url}/v1/items`);
  // The span id is drawn first, then the trace id of a trace started here.
  t.equal(
    receivedFor(res.headers["x-request-id"]).headers.traceparent,
    `00-${"a".repeat(31)}2-${"b".repeat(15)}1-01`,
  );
});
