/**
 * Where every public request enters: its context is made, the stages of the config in force run,
 * and when its response closes the access log line is written and the request metrics are
 * counted. The requests in flight are counted too, so a drain knows when none is left.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Clock } from "../clock.js";
import { createAccessLog, type AccessLog } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { RequestContext, Stage } from "./context.js";
import { runPipeline } from "./runner.js";
import type { Services } from "./services.js";
import type { SpanRecorder } from "./spans.js";

const CONTEXT = Symbol("gatehouse.context");
type TrackedResponse = ServerResponse & { [CONTEXT]?: RequestContext };
// Until the client stage has run (a request answered before it, such as a framing refusal).
const UNKNOWN_CLIENT = Object.freeze({ peer: "", address: "", vouched: null });

/** The entry of the public listener. */
export interface Entry {
  /** The listener's request handler. */
  readonly handle: (req: IncomingMessage, res: ServerResponse) => void;
  /** Requests whose response has not closed yet. */
  inFlight(): number;
  /** Resolves once no request is in flight (one waiter: the drain). */
  idle(): Promise<void>;
}

/**
 * Creates the entry; `stages` gives the stages of the config in force, `spans` its span recorder
 * (undefined while tracing exports nothing).
 */
export function createEntry(
  stages: () => readonly Stage[],
  services: Services,
  spans: () => SpanRecorder | undefined = () => undefined,
): Entry {
  const { metrics, clock } = services;
  const access = createAccessLog(services.log);
  let inFlight = 0;
  let drained: (() => void) | undefined;
  // One listener for every response, finding its request's context on the response.
  function onResponseClose(this: ServerResponse): void {
    inFlight--;
    accessLog(
      (this as TrackedResponse)[CONTEXT] as RequestContext,
      access,
      metrics,
      clock,
      spans(),
    );
    if (inFlight === 0) drained?.();
  }
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const ctx: RequestContext = {
      req,
      res,
      startedAt: services.clock.monotonic(),
      requestId: "",
      traceId: "",
      spanId: "",
      parentSpanId: undefined,
      sampled: false,
      tracestate: undefined,
      client: UNKNOWN_CLIENT,
      path: "",
      query: null,
      route: undefined,
      own: undefined,
      clientId: undefined,
      issuer: undefined,
      clientKey: undefined,
      dpop: false,
      scopes: undefined,
      language: undefined,
      responseHeaders: {},
      decision: "none",
      refusal: undefined,
      upstreamMs: undefined,
    };
    inFlight++;
    (res as TrackedResponse)[CONTEXT] = ctx;
    res.on("close", onResponseClose);
    runPipeline(stages(), ctx, services);
  };
  return {
    handle,
    inFlight: () => inFlight,
    idle: () =>
      inFlight === 0 ? Promise.resolve() : new Promise<void>((done) => (drained = done)),
  };
}

function accessLog(
  ctx: RequestContext,
  log: AccessLog,
  metrics: Metrics,
  clock: Clock,
  spans: SpanRecorder | undefined,
): void {
  const { res } = ctx;
  const status = res.writableFinished ? res.statusCode : 499;
  const durationMs = clock.monotonic() - ctx.startedAt;
  const route = ctx.route?.pattern ?? ctx.own ?? "-";
  metrics.requests.request(route, status, ctx.decision, durationMs / 1000);
  log.write({
    requestId: ctx.requestId,
    traceId: ctx.traceId,
    spanId: ctx.spanId,
    method: ctx.req.method,
    path: ctx.path,
    route,
    status,
    durationMs,
    upstreamMs: ctx.upstreamMs,
    clientId: ctx.clientId,
    issuer: ctx.issuer,
    decision: ctx.decision,
    reason: ctx.refusal,
  });
  spans?.record(ctx, status, durationMs);
}
