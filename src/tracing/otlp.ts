/**
 * Spans over OTLP/HTTP with the OpenTelemetry JS SDK: one SERVER span per sampled request, named
 * and described by the OpenTelemetry HTTP semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/http/http-spans/), batched and posted as JSON to
 * `<otlp_endpoint>/v1/traces`. Loaded only when `tracing.otlp_endpoint` is set.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  createNoopMeter,
  createTraceState,
  trace,
  type Attributes,
  type Counter as OtelCounter,
  type Meter,
  type MeterProvider,
} from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import { AlwaysOnSampler, BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from "@opentelemetry/semantic-conventions";
import type { Counter } from "prom-client";
import type { RequestContext } from "../core/context.js";
import type { SpanExport } from "./span-export.js";
import type { TracingSettings } from "./settings.js";

// The batching: a bounded queue (what does not fit is dropped and counted, never waited for),
// sent every second or as soon as a full batch is waiting.
const MAX_QUEUE = 2048;
const MAX_BATCH = 512;
const BATCH_DELAY_MS = 1000;

// The methods the HTTP semantic conventions name; any other is reported as _OTHER.
const KNOWN_METHODS = new Set([
  "CONNECT",
  "DELETE",
  "GET",
  "HEAD",
  "OPTIONS",
  "PATCH",
  "POST",
  "PUT",
  "TRACE",
]);

// The SDK's own count of the spans a processor is done with (OpenTelemetry semantic conventions,
// SDK metrics: otel.sdk.processor.span.processed); `error.type` is set on those it could not
// send: a full queue, a failed or timed-out export.
const PROCESSED = "otel.sdk.processor.span.processed";

/** A MeterProvider that turns the batch processor's failed spans into `dropped`. */
function droppedSpans(dropped: Counter): MeterProvider {
  const noop = createNoopMeter();
  const counter: OtelCounter = {
    add(value, attributes) {
      if (attributes?.[ATTR_ERROR_TYPE] !== undefined) dropped.inc(value);
    },
  };
  const meter: Meter = Object.assign(Object.create(noop) as Meter, {
    createCounter: (name: string) => (name === PROCESSED ? counter : noop.createCounter(name)),
  });
  return { getMeter: () => meter };
}

// A field as the client sent it: by the time the span is recorded, a forwarded request's
// `headers` are the upstream's (its own Host among them), while `rawHeaders` are the client's.
function sent(ctx: RequestContext, name: string): string | undefined {
  const raw = ctx.req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if ((raw[i] as string).toLowerCase() === name) return raw[i + 1];
  }
  return undefined;
}

/** Splits the client's Host field into the semantic conventions' server.address and server.port. */
function serverAddress(ctx: RequestContext): [string, number] {
  const { req } = ctx;
  const host = sent(ctx, "host");
  const localPort = req.socket.localPort ?? 0;
  if (host === undefined || host === "") return [req.socket.localAddress ?? "", localPort];
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d+))?$/.exec(host);
  if (match === null) return [host, localPort];
  const name = (match[1] as string).replace(/^\[(.*)\]$/, "$1");
  return [name, match[2] === undefined ? 80 : Number(match[2])];
}

/** The span's attributes (semantic conventions for an HTTP server span, and gatehouse's own). */
function attributes(ctx: RequestContext, status: number): Attributes {
  const { req } = ctx;
  const method = req.method ?? "";
  const target = req.url ?? "";
  const query = target.indexOf("?");
  const [address, port] = serverAddress(ctx);
  const attrs: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: KNOWN_METHODS.has(method) ? method : "_OTHER",
    [ATTR_URL_PATH]: ctx.path !== "" ? ctx.path : query === -1 ? target : target.slice(0, query),
    [ATTR_URL_SCHEME]: "http",
    [ATTR_HTTP_RESPONSE_STATUS_CODE]: status,
    [ATTR_SERVER_ADDRESS]: address,
    [ATTR_SERVER_PORT]: port,
    [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersion,
    "gatehouse.route": ctx.route?.pattern ?? "-",
    "gatehouse.decision": ctx.decision,
  };
  if (!KNOWN_METHODS.has(method)) attrs[ATTR_HTTP_REQUEST_METHOD_ORIGINAL] = method;
  if (ctx.route !== undefined) attrs[ATTR_HTTP_ROUTE] = ctx.route.pattern;
  if (ctx.client.address !== "") attrs[ATTR_CLIENT_ADDRESS] = ctx.client.address;
  const agent = sent(ctx, "user-agent");
  if (agent !== undefined) attrs[ATTR_USER_AGENT_ORIGINAL] = agent;
  if (ctx.clientId !== undefined) attrs["gatehouse.client_id"] = ctx.clientId;
  if (ctx.issuer !== undefined) attrs["gatehouse.client_issuer"] = ctx.issuer;
  if (ctx.refusal !== undefined) attrs["gatehouse.reason"] = ctx.refusal;
  if (status >= 500) attrs[ATTR_ERROR_TYPE] = String(status);
  return attrs;
}

/**
 * Opens an OTLP/HTTP export for `settings`. Spans carry the ids gatehouse already gave the
 * request (logged and forwarded), so the SDK's id generator hands those out.
 */
export function openOtlpExport(
  settings: TracingSettings,
  key: string,
  dropped: Counter,
  now: () => number,
): SpanExport {
  const ids = { traceId: "", spanId: "" };
  const exporter = new OTLPTraceExporter({
    url: settings.tracesUrl,
    timeoutMillis: settings.timeoutMs,
  });
  const processor = new BatchSpanProcessor({
    exporter,
    maxQueueSize: MAX_QUEUE,
    maxExportBatchSize: MAX_BATCH,
    scheduledDelayMillis: BATCH_DELAY_MS,
    // Longer than the exporter's own deadline, which therefore always ends an export first and
    // reports its spans as sent or failed.
    exportTimeoutMillis: 2 * settings.timeoutMs,
    selfObsMeterProvider: droppedSpans(dropped),
  });
  const provider = new TracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName }),
    ),
    // The sampling decision was made at arrival (the trace-context stage) and forwarded; only
    // sampled requests reach the tracer.
    sampler: new AlwaysOnSampler(),
    idGenerator: {
      generateTraceId: () => ids.traceId,
      generateSpanId: () => ids.spanId,
    },
    spanProcessors: [processor],
  });
  const tracer = provider.getTracer("gatehouse");
  return {
    key,
    record(ctx, status, durationMs) {
      if (!ctx.sampled) return;
      ids.traceId = ctx.traceId;
      ids.spanId = ctx.spanId;
      const parent =
        ctx.parentSpanId === undefined
          ? ROOT_CONTEXT
          : trace.setSpanContext(ROOT_CONTEXT, {
              traceId: ctx.traceId,
              spanId: ctx.parentSpanId,
              traceFlags: TraceFlags.SAMPLED,
              isRemote: true,
              traceState:
                ctx.tracestate === undefined ? undefined : createTraceState(ctx.tracestate),
            });
      const attrs = attributes(ctx, status);
      const method = attrs[ATTR_HTTP_REQUEST_METHOD] === "_OTHER" ? "HTTP" : ctx.req.method;
      const end = now();
      const span = tracer.startSpan(
        ctx.route === undefined ? `${method}` : `${method} ${ctx.route.pattern}`,
        { kind: SpanKind.SERVER, startTime: end - durationMs, attributes: attrs },
        parent,
      );
      // HTTP semantic conventions: a server span is an error for 5xx only, not 4xx.
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(end);
    },
    // A last export that fails has had its spans counted as dropped; the shutdown goes on.
    shutdown: () => provider.shutdown().catch(() => undefined),
  };
}
