/**
 * The connection to the upstream: one http-proxy-3 server and one keep-alive agent per upstream
 * (url, pool size). Responses are written here so hop-by-hop fields can be removed and
 * gatehouse's own headers added before anything reaches the client.
 */
import {
  Agent as HttpAgent,
  type ClientRequest,
  type IncomingMessage,
  type InformationEvent,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { Socket } from "node:net";
import type { Stream } from "node:stream";
import { performance } from "node:perf_hooks";
import { ProxyServer } from "http-proxy-3";
import { errorReply, type RequestContext } from "../core/context.js";
import { finalHeaders, sendReply } from "../core/respond.js";
import type { Services } from "../core/services.js";
import type { UpstreamSettings } from "./settings.js";
import { createDeadlines } from "./deadlines.js";
import { endToEnd, RESPONSE_HOP_BY_HOP } from "./hop-by-hop.js";
import { closeIdleSockets } from "./idle-sockets.js";
import { relaysInformational, writeInformational } from "./informational.js";
import { endUpload, relayBody } from "./relay.js";
import { retriesOnNewConnection } from "./retry.js";

const CONTEXT = Symbol("gatehouse.context");
const TIMEOUT = Symbol("gatehouse.timeout");

interface Exchange {
  readonly ctx: RequestContext;
  readonly timeoutMs: number;
  /** performance.now() by which the upstream's response headers must arrive. */
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

// The body of a request that has none: http-proxy pipes its `buffer` option into the upstream
// request, and this one only ends it.
const NO_BODY = {
  pipe<T extends NodeJS.WritableStream>(destination: T): T {
    destination.end();
    return destination;
  },
} as unknown as Stream;

const RESPONSE_FIELDS_DROPPED: ReadonlySet<string> = new Set(RESPONSE_HOP_BY_HOP);
// RFC 9110 §8.6: a 204 has no content and carries no Content-Length (nor, §6.4.1, any framing).
// A 304 keeps its Content-Length, which describes the representation it stands for.
const NO_CONTENT_FIELDS_DROPPED: ReadonlySet<string> = new Set([
  ...RESPONSE_HOP_BY_HOP,
  "content-length",
]);

const BAD_GATEWAY = errorReply(502, "bad_gateway", "the upstream refused or reset the connection");
const GATEWAY_TIMEOUT = errorReply(504, "gateway_timeout", "the upstream did not answer in time");

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

/** Creates the forwarder for one upstream. */
export function createForwarder(upstream: UpstreamSettings, services: Services): Forwarder {
  const { url } = upstream;
  const secure = url.protocol === "https:";
  // The upstream URL's path is the prefix of every forwarded path, joined as http-proxy joins
  // them (one slash between the two).
  const base = url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
  const agentOptions = {
    keepAlive: true,
    maxSockets: upstream.maxSockets,
    scheduling: "lifo" as const,
  };
  const agent: HttpAgent = secure ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
  const stopSweep = closeIdleSockets(agent, upstream.idleTimeoutMs);
  const options = {
    // A URL rather than its text: http-proxy parses a string target on every request.
    target: url,
    agent,
    // The path and query are forwarded exactly as canonicalised, never re-parsed; the base path
    // is joined here, so http-proxy need not parse the target's path on every request either.
    toProxy: true,
    prependPath: false,
    xfwd: false,
    selfHandleResponse: true,
  };
  // Two servers on one pool: a request without a body (neither Content-Length nor
  // Transfer-Encoding, RFC 9112 §6.3) ends its upstream request at once instead of being piped
  // into it. Per-request options would do the same, but they give http-proxy's options object a
  // second shape on every request; measured, that cost more than the pipe it saves.
  const withBody = new ProxyServer(options);
  const bodiless = new ProxyServer({ ...options, buffer: NO_BODY });
  // A retry goes out on a connection of its own, never on another pooled one that may be as
  // stale as the one that failed.
  const fresh = new ProxyServer({ ...options, agent: false, buffer: NO_BODY });
  const servers = [withBody, bodiless, fresh];
  for (const server of servers) {
    // http-proxy's deleteLength pass rewrites DELETE and OPTIONS bodies sent chunked into
    // `Content-Length: 0`; framing is the client's and stays as it came.
    // `webPasses` is private in the typings; the version is pinned (~1.23) and a test guards this.
    const internals = server as unknown as { webPasses: Array<{ name: string }> };
    internals.webPasses = internals.webPasses.filter((pass) => pass.name !== "deleteLength");
  }

  const deadlines = createDeadlines<Exchange>((exchange) => {
    exchange.timedOut = true;
    exchange.proxyReq?.destroy(timeoutError());
  });

  const onProxyReq = (proxyReq: ClientRequest, req: IncomingMessage): void => {
    const exchange = (req as TaggedRequest)[CONTEXT];
    if (exchange === undefined) return;
    exchange.proxyReq = proxyReq;
    (proxyReq as TaggedProxyRequest)[CONTEXT] = exchange;
    proxyReq.on("information", onInformation);
    proxyReq.on("upgrade", onUpgrade);
    if (exchange.timedOut) proxyReq.destroy(timeoutError());
  };

  function onInformation(this: TaggedProxyRequest, info: InformationEvent): void {
    const exchange = this[CONTEXT] as Exchange;
    exchange.answered = true;
    const { req, res } = exchange.ctx;
    if (relaysInformational(req, info.statusCode)) writeInformational(res, info);
  }

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
    const { ctx } = exchange;
    ctx.upstreamMs = performance.now() - exchange.sentAt;
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
  };

  const onEconnreset = (_error: Error, req: IncomingMessage): void => {
    const exchange = (req as TaggedRequest)[CONTEXT];
    if (exchange !== undefined) deadlines.remove(exchange);
  };
  // Every error reaches the per-request callback; this listener keeps a stray one from crashing.
  const onStrayError = (error: Error): void => services.log.warn({ err: error }, "upstream error");
  for (const server of servers) {
    server.on("proxyReq", onProxyReq);
    server.on("proxyRes", onProxyRes);
    server.on("econnreset", onEconnreset);
    server.on("error", onStrayError);
  }

  function onError(error: Error, req: IncomingMessage, res: ServerResponse | unknown): void {
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
    const code = (error as NodeJS.ErrnoException).code;
    if (retriesOnNewConnection(exchange, error)) {
      services.log.debug(
        { requestId: ctx.requestId, err: { code, message: error.message } },
        "pooled upstream connection failed; retrying on a new one",
      );
      exchange.retried = true;
      exchange.proxyReq = undefined;
      deadlines.add(exchange);
      fresh.web(req, ctx.res, onError);
      return;
    }
    services.log.warn(
      { requestId: ctx.requestId, err: { code, message: error.message } },
      exchange.timedOut ? "upstream timed out" : "upstream failed",
    );
    sendReply(ctx, exchange.timedOut ? GATEWAY_TIMEOUT : BAD_GATEWAY, services.lifecycle);
  }

  return {
    key: forwarderKey(upstream),
    forward(ctx, timeoutMs) {
      const { req } = ctx;
      const sentAt = performance.now();
      const exchange: Exchange = {
        ctx,
        timeoutMs,
        deadline: sentAt + timeoutMs,
        slot: -1,
        proxyReq: undefined,
        timedOut: false,
        answered: false,
        retried: false,
        sentAt,
      };
      (req as TaggedRequest)[CONTEXT] = exchange;
      deadlines.add(exchange);
      req.url = ctx.query === null ? base + ctx.path : `${base}${ctx.path}?${ctx.query}`;
      if (
        req.headers["content-length"] === undefined &&
        req.headers["transfer-encoding"] === undefined
      ) {
        bodiless.web(req, ctx.res, onError);
      } else {
        withBody.web(req, ctx.res, onError);
        req.on("data", onBodyProgress);
      }
    },
    retire() {
      stopSweep();
      agent.on("free", (socket: Socket) => socket.destroy());
      for (const sockets of Object.values(agent.freeSockets) as Array<Socket[] | undefined>) {
        for (const socket of sockets ?? []) socket.destroy();
      }
    },
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
  if (exchange !== undefined) exchange.deadline = performance.now() + exchange.timeoutMs;
}
