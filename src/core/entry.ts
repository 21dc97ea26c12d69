/**
 * Where every public request enters: its context is made, the stages of the config in force run,
 * and when its response closes the access log line is written and the request metrics are
 * counted. The requests in flight are counted too, so a drain knows when none is left.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Clock } from "../clock.js";
import { http } from "../http/node-http.js";
import { TakenSocket } from "../http/taken-socket.js";
import { createAccessLog, type AccessLog } from "../log.js";
import type { Metrics } from "../metrics.js";
import type { RequestContext, Stage, Upgrade } from "./context.js";
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
  /**
   * A WebSocket handshake on a `websocket: true` route, its connection taken from the HTTP
   * server with the bytes that followed it (`head`): its answer is written on `socket`. Without
   * `room` (the WebSocket cap is reached) it is refused.
   */
  readonly handleUpgrade: (
    req: IncomingMessage,
    socket: Socket,
    head: Buffer,
    room: boolean,
  ) => void;
  /** Requests whose response has not closed yet. */
  inFlight(): number;
  /** Resolves once no request is in flight (one waiter: the drain). */
  idle(): Promise<void>;
}

/**
 * The entry of a WebSocket handshake: a refusal, or an answer other than 101, is written as a
 * response on the socket, then the connection closes, since no HTTP parser reads it any more.
 */
function upgradeHandler(
  start: (req: IncomingMessage, res: ServerResponse, upgrade: Upgrade) => RequestContext,
  complete: (ctx: RequestContext) => void,
  clock: Clock,
): Entry["handleUpgrade"] {
  return (req, socket, head, room) => {
    // The HTTP server's keep-alive timer may still run from the answer before; a connection that
    // becomes a WebSocket has deadlines of its own.
    socket.setTimeout(0);
    const taken = new TakenSocket(socket, head, clock);
    const res = new http.ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket);
    res.on("finish", () => taken.closeAfterAnswer());
    const upgrade: Upgrade = {
      socket,
      taken,
      room,
      lease: undefined,
      relaying: false,
      end: undefined,
      finished: () => complete(ctx),
    };
    const ctx = start(req, res, upgrade);
  };
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
  const complete = (ctx: RequestContext): void => {
    inFlight--;
    ctx.upgrade?.lease?.release();
    accessLog(ctx, access, metrics, clock, spans());
    if (inFlight === 0) drained?.();
  };
  // One listener for every response, finding its request's context on the response. A
  // WebSocket connection is logged when its relay ends, not when its handshake's answer does.
  function onResponseClose(this: ServerResponse): void {
    const ctx = (this as TrackedResponse)[CONTEXT] as RequestContext;
    if (ctx.upgrade?.relaying !== true) complete(ctx);
  }
  const start = (req: IncomingMessage, res: ServerResponse, upgrade: Upgrade | undefined) => {
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
      tokenCarrier: undefined,
      token: undefined,
      upgrade,
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
    return ctx;
  };
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    start(req, res, undefined);
  };
  const handleUpgrade = upgradeHandler(start, complete, clock);
  return {
    handle,
    handleUpgrade,
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
  const { res, upgrade } = ctx;
  const end = upgrade?.end;
  const status = end !== undefined ? 101 : res.writableFinished ? res.statusCode : 499;
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
    websocket: end,
  });
  spans?.record(ctx, status, durationMs);
}
