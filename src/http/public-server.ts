/**
 * The public listener's server (not yet listening): deadlines for slow clients, its connections
 * put in order and capped, and JSON answers to Node's own parser errors, header overflow and
 * timeouts.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Clock } from "../clock.js";
import { http } from "./node-http.js";
import { createClientErrorHandler } from "./client-errors.js";
import { manageConnections, type UpgradeTaker } from "./connections.js";

/** Deadlines for slow clients (a slowloris holds connections otherwise), in milliseconds. */
export interface ClientTimeouts {
  /** The whole header section must arrive within this; 408 after (default 15 s). */
  readonly headersMs?: number;
  /** A token request's body must arrive within this once it is wanted; 408 after (default 10 s). */
  readonly tokenBodyMs?: number;
}

/** The header deadline: RFC 9110 §15.5.9, 10–20 s rather than Node's 60 s (CVE-2018-12122). */
const HEADERS_TIMEOUT_MS = 15_000;
/**
 * The token request body's deadline: shorter than nginx's client_body_timeout
 * (60 s) since the body is at most 8 KiB, and far below Node's 300 s requestTimeout, which a
 * client trickling bytes could otherwise hold the connection for.
 */
const TOKEN_BODY_TIMEOUT_MS = 10_000;

/** The deadlines in force: `overrides`, and the defaults for what they leave out. */
export function clientDeadlines(overrides: ClientTimeouts = {}): Required<ClientTimeouts> {
  return {
    headersMs: overrides.headersMs ?? HEADERS_TIMEOUT_MS,
    tokenBodyMs: overrides.tokenBodyMs ?? TOKEN_BODY_TIMEOUT_MS,
  };
}

/** What the public server is made with. */
export interface PublicServerOptions {
  /** Milliseconds the header section may take to arrive. */
  readonly headersMs: number;
  /** Read at every accepted connection, so a reload changes it. */
  readonly maxConnections: () => number;
  /** Open WebSocket connections at most, read at every handshake. */
  readonly maxWebSockets: () => number;
  readonly now: () => number;
  /** Sets the send deadline's timer. */
  readonly clock: Clock;
  /**
   * Takes a request handed over for its Upgrade field (a WebSocket handshake on a WebSocket
   * route), or declines it with false: it is then served as plain HTTP.
   */
  readonly upgrade: UpgradeTaker;
}

/** Creates the public server; `handle` runs for one request of a connection at a time. */
export function createPublicServer(
  handle: (req: IncomingMessage, res: ServerResponse) => void,
  { headersMs, maxConnections, maxWebSockets, now, clock, upgrade }: PublicServerOptions,
): Server {
  const server = http.createServer({
    headersTimeout: headersMs,
    // Node looks for expired deadlines only this often (30 s by default, so a 15 s deadline could
    // hold a connection for 45 s); a fifth of the deadline keeps the overshoot within 20 %.
    connectionsCheckingInterval: Math.ceil(headersMs / 5),
    keepAliveTimeout: 5_000,
    // The framing stage answers a missing Host itself, with a JSON body like every other error.
    requireHostHeader: false,
  });
  const { onRequest, afterPending } = manageConnections(
    server,
    handle,
    { maxConnections, maxWebSockets },
    upgrade,
    clock,
  );
  server.on("request", onRequest);
  // Node's own parser errors, header overflow and timeouts get JSON bodies too.
  server.on("clientError", createClientErrorHandler(now, afterPending));
  // With this listener Node does not answer `100 Continue` by itself: a request refused before
  // its body is needed never invites the body (RFC 9110 §10.1.1).
  server.on("checkContinue", onRequest);
  return server;
}
