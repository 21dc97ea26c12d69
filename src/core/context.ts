/** The per-request context that stages read facts from and add facts to. */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ClientFacts } from "../http/client-ip.js";
import type { ErrorCode } from "../http/error-codes.js";
import type { Route } from "../routes/table.js";
import type { Socket } from "node:net";
import type { TakenSocket } from "../http/taken-socket.js";

/** An answer gatehouse gives itself; `body` is sent as JSON unless it is a string or Buffer. */
export interface Reply {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: unknown;
}

/** Returned by a stage that has taken over the response (the forward stage). */
export const HANDLED: unique symbol = Symbol("handled");

/** What a stage decides: continue (undefined), answer now (Reply), or it answers itself (HANDLED). */
export type Outcome = Reply | typeof HANDLED | undefined;

/** One step of the request path. */
export type Stage = (ctx: RequestContext) => Outcome | Promise<Outcome>;

/**
 * gatehouse's own endpoints, named in the `route` label and field in place of a route pattern
 * (which always starts with /): a fixed set, so the metrics' label values stay bounded.
 */
export type OwnEndpoint = "token" | "revocation" | "jwks" | "metadata" | "liveness" | "readiness";

/** The scopes a bearer token was granted (RFC 9068 §2.2.3), read once when it was verified. */
export interface GrantedScopes {
  /** The `scope` claim as signed, space-separated; "" when the token has none. */
  readonly text: string;
  readonly names: ReadonlySet<string>;
}

/** What the stages after the authenticate stage know of the token it accepted. */
export interface AcceptedToken {
  /** "" for a provider's token without one. */
  readonly jti: string;
  /** Until when it is accepted (epoch ms). */
  readonly untilMs: number;
}

/** What a WebSocket connection did, when it ended: for the access log and the metrics. */
export interface ConnectionEnd {
  /** Bytes from the client to the upstream, and back. */
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly closedBy: "client" | "upstream" | "gatehouse";
  /** close_frame, connection_closed, idle, token_expired, revoked, client_removed or shutdown. */
  readonly reason: string;
}

/** A WebSocket handshake's connection, taken from the HTTP server (websocket/upgrade.ts). */
export interface Upgrade {
  /** The client's connection. */
  readonly socket: Socket;
  /** The connection until the answer: holds the bytes the client sent after the handshake. */
  readonly taken: TakenSocket;
  /** Whether the handshake fits under the process's WebSocket cap; refused 503 without. */
  readonly room: boolean;
  /** The connection's slot among its client's `connections`, given back when it ends. */
  lease: { release(): void } | undefined;
  /** The upstream's 101 went through: the connection is relayed until `end`. */
  relaying: boolean;
  /** What the connection did, once it ended. */
  end: ConnectionEnd | undefined;
  /** Logs and counts the connection once it ended: the access log line is written then. */
  readonly finished: () => void;
}

/** A request field that carried the access token, and what is left of it (undefined: nothing). */
export interface TokenCarrier {
  readonly field: "cookie" | "sec-websocket-protocol";
  readonly rest: string | undefined;
}

/** Facts about one request, written by the stages in order. */
export interface RequestContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The clock's monotonic milliseconds at arrival. */
  readonly startedAt: number;
  requestId: string;
  /** W3C Trace Context: the request's trace, 32 hex digits (set by the trace-context stage). */
  traceId: string;
  /** gatehouse's own span for this request, 16 hex digits: the parent-id the upstream receives. */
  spanId: string;
  /** The caller's span, when an inbound traceparent was continued. */
  parentSpanId: string | undefined;
  /** The sampling decision, forwarded in the traceparent's flags. */
  sampled: boolean;
  /** The inbound tracestate, forwarded unchanged with a continued trace. */
  tracestate: string | undefined;
  /** Who sent the request (set by the client stage, before anything reads it). */
  client: ClientFacts;
  /** The canonical path (set by the canonical-path stage). */
  path: string;
  /** The raw query without `?`, or null when the target had none. */
  query: string | null;
  route: Route | undefined;
  /** gatehouse's own endpoint that answered, the `route` of its metrics and access-log line. */
  own: OwnEndpoint | undefined;
  /** The authenticated client id, as its token names it (X-Client-Id). */
  clientId: string | undefined;
  /** Its token's issuer: `own` for gatehouse's, else a `trusted_issuers` name. */
  issuer: string | undefined;
  /** The client's plan and counters key: its id, or `<issuer>:<id>` for a provider's client. */
  clientKey: string | undefined;
  /** The request sent its token with the DPoP scheme (RFC 9449 §7.1), set by the authenticate stage. */
  dpop: boolean;
  /**
   * The field that carried the token when not Authorization, and its value without it: what the
   * upstream receives in its place (set by the authenticate stage).
   */
  tokenCarrier: TokenCarrier | undefined;
  /** The accepted token (set by the authenticate stage). */
  token: AcceptedToken | undefined;
  /** A WebSocket handshake on a `websocket: true` route, and the connection it opens. */
  readonly upgrade: Upgrade | undefined;
  /** The bearer token's scopes (set by the authenticate stage). */
  scopes: GrantedScopes | undefined;
  /** The one Accept-Language tag the upstream receives (set by the language stage). */
  language: string | undefined;
  /** Headers that every response to this request carries, by lower-case name. */
  readonly responseHeaders: Record<string, string>;
  /** The limit decision for logs and metrics: none (the limiter was not consulted), allowed, ... */
  decision: string;
  /** Why the bearer token was refused (`bearer_<rule>`), the access log's `reason`. */
  refusal: string | undefined;
  /** Milliseconds until the upstream's response headers, when the request was forwarded. */
  upstreamMs: number | undefined;
}

/** A JSON error reply: `{"error": code, "message": message}`. */
export function errorReply(
  status: number,
  code: ErrorCode,
  message: string,
  headers?: Readonly<Record<string, string>>,
): Reply {
  return headers === undefined
    ? { status, body: { error: code, message } }
    : { status, headers, body: { error: code, message } };
}
