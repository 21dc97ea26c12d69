/**
 * A WebSocket handshake (RFC 6455 §4) on a `websocket: true` route: it went through every stage
 * as a request; the upstream's 101 is relayed to the client with the upstream's `Sec-WebSocket-*`
 * fields and gatehouse's own headers, and from then on the two connections are one relay.
 */
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from "node:http";
import type { Duplex } from "node:stream";
import type { RequestContext, Upgrade } from "../core/context.js";
import { finalHeaders } from "../core/respond.js";
import type { Lifecycle, Services } from "../core/services.js";
import { canonicalTarget } from "../http/path.js";
import type { RouteTable } from "../routes/table.js";
import { RESPONSE_HOP_BY_HOP } from "../upstream/hop-by-hop.js";
import type { OpenConnections } from "./open-connections.js";
import { Relay } from "./relay.js";

const DROPPED: ReadonlySet<string> = new Set(RESPONSE_HOP_BY_HOP);

/** Whether a request is a WebSocket handshake (RFC 6455 §4.1): a GET asking for websocket. */
export function isWebSocketHandshake(method: string | undefined, upgrade: unknown): boolean {
  if (method !== "GET" || typeof upgrade !== "string") return false;
  // RFC 9110 §7.8: a list of protocols, compared without case.
  return upgrade.split(",").some((protocol) => protocol.trim().toLowerCase() === "websocket");
}

// RFC 6455 §1.3: what a server appends to the client's Sec-WebSocket-Key before hashing it.
const ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/**
 * Whether `accept`, a 101's Sec-WebSocket-Accept, answers `key`, the handshake's
 * Sec-WebSocket-Key: the base64 of the SHA-1 of the key and the GUID (RFC 6455 §4.2.2, checked
 * as §4.1 asks a client to). A missing or repeated field answers nothing.
 */
export function answersKey(key: unknown, accept: unknown): boolean {
  if (typeof key !== "string" || typeof accept !== "string") return false;
  const answer = createHash("sha1").update(key).update(ACCEPT_GUID).digest("base64");
  return accept === answer;
}

/**
 * Whether a request the HTTP server handed over for its Upgrade field is a WebSocket handshake
 * on a `websocket: true` route of `routes`; any other is served as plain HTTP.
 */
export function opensWebSocket(routes: RouteTable, req: IncomingMessage): boolean {
  // RFC 9110 §7.8: a server ignores Upgrade in an HTTP/1.0 request.
  if (req.httpVersion !== "1.1") return false;
  if (!isWebSocketHandshake(req.method, req.headers.upgrade)) return false;
  const target = canonicalTarget(req.url ?? "");
  if (typeof target === "string") return false;
  const match = routes.match("GET", target.path);
  return match.kind === "route" && match.route.websocket;
}

// The 101's head: the upstream's end-to-end fields (Sec-WebSocket-Accept, -Protocol and
// -Extensions among them), then gatehouse's own, as on every answer: X-Request-Id, the limits'.
function switchingHead(ctx: RequestContext, fields: IncomingHttpHeaders, lifecycle: Lifecycle) {
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && !DROPPED.has(name)) headers[name] = value;
  }
  finalHeaders(ctx, headers, lifecycle);
  // A draining replica's `Connection: close` has no place here: the connection is switching.
  headers.connection = "Upgrade";
  headers.upgrade = "websocket";
  let head = "HTTP/1.1 101 Switching Protocols\r\n";
  for (const [name, value] of Object.entries(headers)) {
    for (const line of Array.isArray(value) ? value : [value]) head += `${name}: ${line}\r\n`;
  }
  return `${head}\r\n`;
}

/** What a relay needs of the process: its services, settings and open connections. */
export interface RelayDeps {
  readonly services: Services;
  readonly idleMs: number;
  readonly open: OpenConnections;
  /** Whether the connection's token is revoked now (gatehouse's own tokens only). */
  readonly revoked: (
    ctx: RequestContext,
  ) => ((nowMs: number) => boolean | Promise<boolean | "unavailable">) | undefined;
}

/** The upstream switched protocols: the 101 goes to the client and the relay starts. */
export function switchProtocols(
  ctx: RequestContext,
  fields: IncomingHttpHeaders,
  upstream: Duplex,
  deps: RelayDeps,
): void {
  const upgrade = ctx.upgrade as Upgrade;
  const { socket } = upgrade;
  const { metrics, clock } = deps.services;
  const route = ctx.route?.pattern ?? "-";
  const held = upgrade.taken.take();
  socket.write(switchingHead(ctx, fields, deps.services.lifecycle), "latin1");
  metrics.websocketConnections.inc({ route });
  const bytes = {
    in: metrics.websocketBytes.labels({ route, direction: "in" }),
    out: metrics.websocketBytes.labels({ route, direction: "out" }),
  };
  const relay = new Relay(socket, upstream, {
    clock,
    idleMs: deps.idleMs,
    counted: (direction, count) => bytes[direction].inc(count),
    ended: (end) => {
      deps.open.remove(connection);
      metrics.websocketConnections.dec({ route });
      metrics.websocketCloses.inc({ route, closed_by: end.closedBy, reason: end.reason });
      upgrade.end = end;
      upgrade.finished();
    },
  });
  // Bytes the client sent before the 101 (RFC 6455 asks it to wait) go through the relay too:
  // counted, and followed among the client's frames like every later byte.
  if (held.length > 0) relay.fromClient(held);
  socket.resume();
  upgrade.relaying = true;
  const connection = {
    relay,
    untilMs: ctx.token?.untilMs ?? Number.POSITIVE_INFINITY,
    revoked: deps.revoked(ctx),
    issuer: ctx.issuer,
    clientId: ctx.clientId,
  };
  deps.open.add(connection);
}
