/**
 * The connection to the upstream: one keep-alive pool and its http-proxy-3 servers per upstream
 * (url, pool size; pool.ts). Responses are written here so hop-by-hop fields can be removed and
 * gatehouse's own headers added before anything reaches the client.
 */
import type { ClientRequest, IncomingMessage, InformationEvent, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { errorReply, type Reply, type RequestContext } from "../core/context.js";
import { finalHeaders, sendReply } from "../core/respond.js";
import { fail } from "../core/runner.js";
import type { Clock } from "../clock.js";
import type { Services } from "../core/services.js";
import type { UpstreamSettings } from "./settings.js";
import { createDeadlines, type Deadlines } from "./deadlines.js";
import { endToEnd, RESPONSE_HOP_BY_HOP } from "./hop-by-hop.js";
import { relaysInformational, writeInformational } from "./informational.js";
import { createPool, type Pool } from "./pool.js";
import { endUpload, relayBody } from "./relay.js";
import { retriesOnNewConnection } from "./retry.js";
import { createTurnBatch, type TurnBatch } from "./turn-batch.js";

const CONTEXT = Symbol("gatehouse.context");
const TIMEOUT = Symbol("gatehouse.timeout");

interface Exchange {
  readonly ctx: RequestContext;
  readonly timeoutMs: number;
  /** The clock the deadline is read on. */
  readonly clock: Clock;
  /** When (on `clock`) the upstream's response headers must have arrived. */
  deadline: number;
  slot: number;
  proxyReq: ClientRequest | undefined;
  timedOut: boolean;
  /** Some of the upstream's answer arrived: a 1xx at least. */
  answered: boolean;
  retried: boolean;
  readonly sentAt: number;
}

type TaggedRequest = IncomingMessage & { [CONTEXT]?: Exchange };
type TaggedProxyRequest = ClientRequest & { [CONTEXT]?: Exchange };

const RESPONSE_FIELDS_DROPPED: ReadonlySet<string> = new Set(RESPONSE_HOP_BY_HOP);
// RFC 9110 §8.6: a 204 has no content and carries no Content-Length (nor, §6.4.1, any framing).
// A 304 keeps its Content-Length, which describes the representation it stands for.
const NO_CONTENT_FIELDS_DROPPED: ReadonlySet<string> = new Set([
  ...RESPONSE_HOP_BY_HOP,
  "content-length",
]);

const BAD_GATEWAY_MESSAGE = "the upstream refused or reset the connection";
const GATEWAY_TIMEOUT_MESSAGE = "the upstream did not answer in time";
const BAD_GATEWAY = errorReply(502, "bad_gateway", BAD_GATEWAY_MESSAGE);
const GATEWAY_TIMEOUT = errorReply(504, "gateway_timeout", GATEWAY_TIMEOUT_MESSAGE);
// The same answers to a client still uploading: nothing reads the rest of its body any more, so
// its connection closes after the answer instead of waiting for a next request that never comes.
const CLOSE = { connection: "close" };
const BAD_GATEWAY_CLOSING = errorReply(502, "bad_gateway", BAD_GATEWAY_MESSAGE, CLOSE);
const GATEWAY_TIMEOUT_CLOSING = errorReply(504, "gateway_timeout", GATEWAY_TIMEOUT_MESSAGE, CLOSE);

function failureReply(timedOut: boolean, uploading: boolean): Reply {
  if (timedOut) return uploading ? GATEWAY_TIMEOUT_CLOSING : GATEWAY_TIMEOUT;
  return uploading ? BAD_GATEWAY_CLOSING : BAD_GATEWAY;
}

/** Forwards requests to one upstream. */
export interface Forwarder {
  readonly key: string;
  /** Sends the request on; the response (or a 502/504) is written to ctx.res. */
  forward(ctx: RequestContext, timeoutMs: number): void;
  /** Stops reusing sockets: idle ones close now, busy ones when their exchange ends. */
  retire(): void;
}

/** The pool identity of an upstream: a reload that keeps it keeps the forwarder. */
export function forwarderKey(upstream: UpstreamSettings): string {
  return `${upstream.url.href} ${upstream.maxSockets} ${upstream.idleTimeoutMs}`;
}

/** A new exchange for `ctx`, whose response headers are due within `timeoutMs`. */
function newExchange(ctx: RequestContext, timeoutMs: number, clock: Clock): Exchange {
  const sentAt = clock.monotonic();
  return {
    ctx,
    timeoutMs,
    clock,
    deadline: sentAt + timeoutMs,
    slot: -1,
    proxyReq: undefined,
    timedOut: false,
    answered: false,
    retried: false,
    sentAt,
  };
}

function onInformation(this: TaggedProxyRequest, info: InformationEvent): void {
  const exchange = this[CONTEXT] as Exchange;
  exchange.answered = true;
  const { req, res } = exchange.ctx;
  if (relaysInformational(req, info.statusCode)) writeInformational(res, info);
}

/** Writes the upstream's response head, without its hop-by-hop fields, then relays its body. */
function writeResponse(
  services: Services,
  exchange: Exchange,
  proxyRes: IncomingMessage,
  res: ServerResponse,
): void {
  const { ctx } = exchange;
  const { req } = ctx;
  ctx.upstreamMs = services.clock.monotonic() - exchange.sentAt;
  services.metrics.requests.upstreamResponse(ctx.upstreamMs / 1000);
  const status = proxyRes.statusCode ?? 502;
  const headers = endToEnd(
    proxyRes.headers,
    status === 204 ? NO_CONTENT_FIELDS_DROPPED : RESPONSE_FIELDS_DROPPED,
    false,
  );
  // An answer while the client is still uploading: an upstream keeping its connection goes on
  // reading (a full-duplex exchange); one closing it wants no more of the body.
  const { proxyReq } = exchange;
  if (!req.complete && proxyReq?.shouldKeepAlive === false) {
    endUpload(req, proxyReq, proxyRes, headers);
  }
  res.writeHead(status, proxyRes.statusMessage, finalHeaders(ctx, headers, services.lifecycle));
  relayBody(proxyRes, res);
}

/** What the exchanges of one forwarder share. */
interface Shared {
  readonly services: Services;
  readonly pool: Pool;
  readonly deadlines: Deadlines<Exchange>;
  /** The per-request error callback given to http-proxy: `failed` with this record. */
  readonly onError: (error: Error, req: IncomingMessage, res: ServerResponse | unknown) => void;
}

// An exchange failed: retried on a new connection when that is safe, else answered 502 or 504,
// or, when the answer has begun, left alone or cut off.
function failed(
  shared: Shared,
  error: Error,
  req: IncomingMessage,
  res: ServerResponse | unknown,
): void {
  const { services, deadlines } = shared;
  const exchange = (req as TaggedRequest)[CONTEXT];
  if (exchange === undefined) return;
  deadlines.remove(exchange);
  exchange.proxyReq?.destroy();
  const { ctx } = exchange;
  if ((res as ServerResponse).headersSent) {
    // A failure after a complete answer (the rest of an upload the upstream no longer reads)
    // leaves that answer alone; a failure mid-answer cuts the client off.
    if (!(res as ServerResponse).writableEnded) (res as ServerResponse).destroy();
    return;
  }
  if (retriesOnNewConnection(exchange, error)) {
    services.log.debug(
      { requestId: ctx.requestId, err: error },
      "pooled upstream connection failed; retrying on a new one",
    );
    exchange.retried = true;
    exchange.proxyReq = undefined;
    deadlines.add(exchange);
    shared.pool.fresh.web(req, ctx.res, shared.onError);
    return;
  }
  services.log.warn(
    { requestId: ctx.requestId, err: error },
    exchange.timedOut ? "upstream timed out" : "upstream failed",
  );
  sendReply(ctx, failureReply(exchange.timedOut, !req.complete), services.lifecycle);
}

/**
 * Sends each exchange upstream at the end of the turn that decided it, with the others decided
 * in that turn (turn-batch.ts says why).
 */
function sendAtEndOfTurn(shared: Shared): TurnBatch<Exchange> {
  const { pool, deadlines, onError, services } = shared;
  return createTurnBatch<Exchange>(
    (exchange) => {
      const { req, res } = exchange.ctx;
      // The client left while its request waited for the end of the turn.
      if (res.destroyed) {
        deadlines.remove(exchange);
        return;
      }
      if (
        req.headers["content-length"] === undefined &&
        req.headers["transfer-encoding"] === undefined
      ) {
        pool.bodiless.web(req, res, onError);
      } else {
        pool.withBody.web(req, res, onError);
        req.on("data", onBodyProgress);
      }
    },
    (exchange, error) => {
      deadlines.remove(exchange);
      fail(error, exchange.ctx, services);
    },
  );
}

/** Creates the forwarder for one upstream. */
export function createForwarder(upstream: UpstreamSettings, services: Services): Forwarder {
  const { url } = upstream;
  // The upstream URL's path is the prefix of every forwarded path, joined as http-proxy joins
  // them (one slash between the two).
  const base = url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
  const pool = createPool(upstream);

  const deadlines = createDeadlines<Exchange>((exchange) => {
    exchange.timedOut = true;
    exchange.proxyReq?.destroy(timeoutError());
  }, services.clock);
  const shared: Shared = {
    services,
    pool,
    deadlines,
    onError: (error, req, res) => failed(shared, error, req, res),
  };
  const { onError } = shared;

  const onProxyReq = (proxyReq: ClientRequest, req: IncomingMessage): void => {
    const exchange = (req as TaggedRequest)[CONTEXT];
    if (exchange === undefined) return;
    exchange.proxyReq = proxyReq;
    (proxyReq as TaggedProxyRequest)[CONTEXT] = exchange;
    proxyReq.on("information", onInformation);
    proxyReq.on("upgrade", onUpgrade);
    if (exchange.timedOut) proxyReq.destroy(timeoutError());
  };

  // gatehouse never forwards Upgrade, so a 101 answers nothing the client asked; after it the
  // connection speaks another protocol. Without this listener Node drops the socket silently
  // and the exchange would wait for nothing.
  function onUpgrade(this: TaggedProxyRequest, _res: IncomingMessage, socket: Socket): void {
    socket.destroy();
    const exchange = this[CONTEXT] as Exchange;
    exchange.answered = true;
    const error = Object.assign(new Error("the upstream switched protocols unasked (101)"), {
      code: "EUNASKEDUPGRADE",
    });
    onError(error, exchange.ctx.req, exchange.ctx.res);
  }

  const onProxyRes = (
    proxyRes: IncomingMessage,
    req: IncomingMessage,
    res: ServerResponse,
  ): void => {
    const exchange = (req as TaggedRequest)[CONTEXT];
    if (exchange === undefined) return;
    deadlines.remove(exchange);
    writeResponse(services, exchange, proxyRes, res);
  };

  const onEconnreset = (_error: Error, req: IncomingMessage): void => {
    const exchange = (req as TaggedRequest)[CONTEXT];
    if (exchange !== undefined) deadlines.remove(exchange);
  };
  // Every error reaches the per-request callback; this listener keeps a stray one from crashing.
  const onStrayError = (error: Error): void => services.log.warn({ err: error }, "upstream error");
  for (const server of pool.servers) {
    server.on("proxyReq", onProxyReq);
    server.on("proxyRes", onProxyRes);
    server.on("econnreset", onEconnreset);
    server.on("error", onStrayError);
  }

  const send = sendAtEndOfTurn(shared);

  return {
    key: forwarderKey(upstream),
    forward(ctx, timeoutMs) {
      const { req } = ctx;
      const exchange = newExchange(ctx, timeoutMs, services.clock);
      (req as TaggedRequest)[CONTEXT] = exchange;
      deadlines.add(exchange);
      req.url = ctx.query === null ? base + ctx.path : `${base}${ctx.path}?${ctx.query}`;
      send(exchange);
    },
    retire: () => pool.retire(),
  };
}

function timeoutError(): Error {
  return Object.assign(new Error("no response headers within upstream.timeout"), {
    code: TIMEOUT.description,
  });
}

// The upstream cannot answer before it has the body: while a body is still on its way to the
// upstream, each chunk restarts the wait, so a slow client upload is not taken for a slow
// upstream. A stalled upstream stops reading, the chunks stop, and the wait runs out (504).
function onBodyProgress(this: TaggedRequest): void {
  const exchange = this[CONTEXT];
  if (exchange !== undefined) exchange.deadline = exchange.clock.monotonic() + exchange.timeoutMs;
}
