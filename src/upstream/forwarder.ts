/**
 * The connection to the upstream: one pool of keep-alive connections per upstream (url, pool
 * size, idle timeout; pool.ts), on which each request is an exchange (exchange.ts).
 */
import type { RequestContext } from "../core/context.js";
import { fail } from "../core/runner.js";
import type { Services } from "../core/services.js";
import type { UpstreamSettings } from "./settings.js";
import { createDeadlines } from "./deadlines.js";
import { Exchange, type Shared } from "./exchange.js";
import { requestHead } from "./message-head.js";
import { createPool } from "./pool.js";
import { createTurnBatch, type TurnBatch } from "./turn-batch.js";

/** Forwards requests to one upstream. */
export interface Forwarder {
  readonly key: string;
  /** Sends the request on; the response (or a 502/504) is written to ctx.res. */
  forward(ctx: RequestContext, timeoutMs: number): void;
  /** Stops reusing connections: idle ones close now, busy ones when their exchange ends. */
  retire(): void;
}

/** The pool identity of an upstream: a reload that keeps it keeps the forwarder. */
export function forwarderKey(upstream: UpstreamSettings): string {
  return `${upstream.url.href} ${upstream.maxSockets} ${upstream.idleTimeoutMs}`;
}

/**
 * Sends each exchange upstream at the end of the turn that decided it, with the others decided
 * in that turn (turn-batch.ts says why).
 */
function sendAtEndOfTurn(shared: Shared): TurnBatch<Exchange> {
  const { pool, deadlines, services } = shared;
  return createTurnBatch<Exchange>(
    (exchange) => {
      // The client left, or the deadline passed, while the request waited for the end of the turn.
      if (exchange.done) return;
      if (exchange.ctx.res.destroyed) exchange.left();
      else pool.acquire(exchange);
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
  // The upstream URL's path is the prefix of every forwarded path, with one slash between the two.
  const base = url.pathname.endsWith("/") ? url.pathname.slice(0, -1) : url.pathname;
  const shared: Shared = {
    services,
    pool: createPool(upstream),
    deadlines: createDeadlines<Exchange>((exchange) => exchange.expire(), services.clock),
  };
  const send = sendAtEndOfTurn(shared);

  return {
    key: forwarderKey(upstream),
    forward(ctx, timeoutMs) {
      const { req } = ctx;
      // An empty query goes without its `?`.
      const { query } = ctx;
      const target =
        query === null || query === "" ? base + ctx.path : `${base}${ctx.path}?${query}`;
      let head: string;
      try {
        head = requestHead(req.method as string, target, req.headers);
      } catch (error) {
        fail(error, ctx, services);
        return;
      }
      const exchange = new Exchange(shared, ctx, timeoutMs, head);
      shared.deadlines.add(exchange);
      send(exchange);
    },
    retire: () => shared.pool.retire(),
  };
}
