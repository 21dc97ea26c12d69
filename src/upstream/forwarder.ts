/**
 * The connection to the upstream: one undici `Pool` per upstream (url, pool size, idle timeout,
 * TLS name), on which each request is an exchange (exchange.ts). undici keeps the connections:
 * their reuse, the framing of both messages, and the end of a connection that broke it.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Socket } from "node:net";
import type { Dispatcher } from "undici";
import type { RequestContext } from "../core/context.js";
import { fail } from "../core/runner.js";
import type { Services } from "../core/services.js";
import type { UpstreamSettings } from "./settings.js";
import { answerFirst } from "./answer-first.js";
import { createDeadlines } from "./deadlines.js";
import { Exchange, type Shared } from "./exchange.js";
import { createTurnBatch, type TurnBatch } from "./turn-batch.js";
import { buildConnector, Client, Pool } from "./undici.js";
import { UpgradeExchange } from "./upgrade-exchange.js";
import type { RelayDeps } from "../websocket/upgrade.js";

/** Forwards requests to one upstream. */
export interface Forwarder {
  readonly key: string;
  /**
   * Sends the request on, with the client's body when `withBody`; the response (or a 502/504)
   * is written to ctx.res.
   */
  forward(ctx: RequestContext, timeoutMs: number, withBody: boolean): void;
  /**
   * Sends a WebSocket handshake on (RFC 6455 §4.1): the upstream's 101 starts a relay made with
   * `relay`; another answer (or a 502/504) is written to ctx.res.
   */
  upgrade(ctx: RequestContext, timeoutMs: number, relay: RelayDeps): void;
  /** Stops taking requests: idle connections close now, busy ones when their exchange ends. */
  retire(): void;
}

/**
 * The pool identity of an upstream, every setting its pool is built from (the timeout bounds its
 * connection attempts): a reload that keeps it keeps the forwarder.
 */
export function forwarderKey(upstream: UpstreamSettings): string {
  const { url, maxSockets, idleTimeoutMs, timeoutMs, serverName } = upstream;
  return `${url.href} ${maxSockets} ${idleTimeoutMs} ${timeoutMs} ${serverName ?? ""}`;
}

/** Whether a request's own framing says it has a body to stream (`Content-Length: 0` does not). */
export function sendsBody(headers: IncomingHttpHeaders): boolean {
  if (headers["transfer-encoding"] !== undefined) return true;
  const length = headers["content-length"];
  return length !== undefined && length !== "0";
}

/**
 * Opens the connections to `upstream`: undici's connector (TCP or TLS, TLS sessions resumed, SNI
 * for a host name or `server_name`), whose sockets let the upstream's answer win over a failed
 * write (answer-first.ts).
 */
function connector(upstream: UpstreamSettings): ReturnType<typeof buildConnector> {
  const open = buildConnector({
    timeout: upstream.timeoutMs,
    // RFC 6066 §3: SNI names a host; undici sends none for an address.
    ...(upstream.serverName === undefined ? {} : { servername: upstream.serverName }),
  });
  return (options, callback) =>
    open(options, (error, socket) => {
      if (error !== null) callback(error, null);
      else {
        answerFirst(socket as Socket);
        callback(null, socket);
      }
    });
}

/** What the pool and the connections of a retry are opened with. */
function clientOptions(upstream: UpstreamSettings): ConstructorParameters<typeof Pool>[1] {
  const { idleTimeoutMs } = upstream;
  return {
    // One request at a time on a connection (RFC 9112 §9.3.2 lets a client pipeline, but an
    // upstream that answers out of turn would then hand one client another's answer).
    pipelining: 1,
    // gatehouse closes a connection idle this long, before the upstream closes it under a
    // request; an upstream's own `Keep-Alive: timeout` shortens it (less undici's margin).
    keepAliveTimeout: idleTimeoutMs,
    keepAliveMaxTimeout: idleTimeoutMs,
    // The wait for the response head is gatehouse's own deadline (it counts the wait for a
    // connection too); the silence after the head is undici's, set per request.
    headersTimeout: 0,
    connect: connector(upstream),
  };
}

/**
 * Sends each exchange upstream at the end of the turn that decided it, with the others decided
 * in that turn (turn-batch.ts says why).
 */
function sendAtEndOfTurn(shared: Shared): TurnBatch<Exchange> {
  const { deadlines, services } = shared;
  return createTurnBatch<Exchange>(
    (exchange) => {
      // The client left, or the deadline passed, while the request waited for the end of the turn.
      if (exchange.done) return;
      if (exchange.ctx.res.destroyed) exchange.left();
      else exchange.send();
    },
    (exchange, error) => {
      deadlines.remove(exchange);
      exchange.done = true;
      fail(error, exchange.ctx, services);
    },
  );
}

/** Creates the forwarder for one upstream. */
export function createForwarder(upstream: UpstreamSettings, services: Services): Forwarder {
  const { url } = upstream;
  // The upstream URL's path is the prefix of every forwarded path, with one slash between the two.
  const base = url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
  const options = clientOptions(upstream);
  // The pool opens connections only when exchanges need them, at most max_sockets.
  const pool = new Pool(url.origin, { ...options, connections: upstream.maxSockets });
  const shared: Shared = {
    services,
    dispatcher: pool,
    single: () => new Client(url.origin, options),
    deadlines: createDeadlines<Exchange>((exchange) => exchange.expire(), services.clock),
  };
  const send = sendAtEndOfTurn(shared);

  // An empty query goes without its `?`.
  const pathOf = ({ path, query }: RequestContext): string =>
    query === null || query === "" ? base + path : `${base}${path}?${query}`;

  return {
    key: forwarderKey(upstream),
    forward(ctx, timeoutMs, withBody) {
      const { req } = ctx;
      const options: Dispatcher.DispatchOptions = {
        path: pathOf(ctx),
        method: req.method as Dispatcher.HttpMethod,
        headers: req.headers as Record<string, string | string[]>,
        // After the response head, silence this long ends the exchange (the client's connection
        // is cut, so the body is visibly incomplete).
        bodyTimeout: timeoutMs,
      };
      const exchange = new Exchange(shared, ctx, timeoutMs, options, withBody);
      shared.deadlines.add(exchange);
      send(exchange);
    },
    upgrade(ctx, timeoutMs, relay) {
      // undici writes `Connection: upgrade` and `Upgrade: websocket` itself; the client's
      // Sec-WebSocket-* fields go on as they came.
      const options: Dispatcher.DispatchOptions = {
        path: pathOf(ctx),
        method: "GET",
        headers: ctx.req.headers as Record<string, string | string[]>,
        upgrade: "websocket",
      };
      const exchange = new UpgradeExchange(shared, ctx, timeoutMs, options, relay);
      shared.deadlines.add(exchange);
      send(exchange);
    },
    retire() {
      // Requests under way finish, those decided in this turn included (they are sent at its
      // end); then the pool takes no more and its connections close.
      setImmediate(() => void pool.close().catch(() => undefined));
    },
  };
}
