/** The headers the upstream receives: the only place the outgoing request's headers change. */
import type { Counter } from "prom-client";
import type { UpstreamSettings } from "./settings.js";
import type { RequestContext } from "../core/context.js";
import { endToEnd, REQUEST_HOP_BY_HOP } from "./hop-by-hop.js";
import { formatTraceParent } from "../http/trace-context.js";

// RFC 7239 §8 and Envoy's use_remote_address: a client's own forwarding claims are believed only
// from a trusted proxy.
const FORWARDING_CLAIMS = [
  "forwarded",
  "x-real-ip",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
];

// Fields gatehouse rewrites on every request besides those it owns outright: the upstream's
// authority and the message framing (the upstream connection frames the body anew).
const REWRITTEN = ["host", "via", "content-length", "transfer-encoding"];

// Whole families gatehouse sets or removes, whatever follows the prefix.
const OWNED_PREFIXES = ["x-forwarded-", "proxy-"];

/** Counts request headers dropped for their name, by `reason`. */
export type DroppedHeaders = Pick<Counter<"reason">, "inc">;

/** Builds, once per config, the function that writes the upstream's request headers. */
export function createUpstreamHeaders(
  upstream: UpstreamSettings,
  dropped: DroppedHeaders,
): (ctx: RequestContext) => void {
  // What is never copied from the client: hop-by-hop fields, the identity, issuer and scopes
  // headers gatehouse owns (X-Client-Scopes and X-Client-Issuer even when not sent, so an
  // upstream that reads them is never fooled), the bearer token unless it is to be passed on;
  // and from an untrusted peer,
  // forwarding claims.
  // The request id and the language are always gatehouse's own (the language stage runs on every
  // forwarded request), so they are added after the client's fields rather than overwritten in
  // place: every request then has its own fields in one order, whatever the client sent.
  // So are the trace context fields: the upstream's parent is gatehouse's span, and a tracestate
  // goes on only with the trace it belongs to.
  const { identityHeader, scopesHeader, issuerHeader } = upstream;
  const own = [
    ...REQUEST_HOP_BY_HOP,
    // undici frames the body it sends: by its Content-Length, or chunked when it has none.
    "transfer-encoding",
    identityHeader,
    "x-request-id",
    "accept-language",
    "traceparent",
    "tracestate",
    // RFC 9449: a proof is made for gatehouse's URL and spent here; the upstream cannot use it.
    "dpop",
  ];
  own.push(scopesHeader === "" ? "x-client-scopes" : scopesHeader);
  own.push(issuerHeader === "" ? "x-client-issuer" : issuerHeader);
  if (!upstream.forwardAuthorization) own.push("authorization");
  const fromProxy = new Set(own);
  // The upstream's own authority, as nginx's proxy_pass sends it; the client's goes in
  // X-Forwarded-Host.
  const host = upstream.url.host;
  const fromClient = new Set([...own, ...FORWARDING_CLAIMS]);
  const underscored = underscoreRule(upstream.keepUnderscoreHeaders, [...fromClient, ...REWRITTEN]);

  /**
   * Replaces `ctx.req.headers` with what the upstream receives: the client's end-to-end fields
   * first, then gatehouse's own, so a client can neither remove them nor supply them.
   */
  return function upstreamHeaders(ctx) {
    const { req } = ctx;
    const { peer, vouched } = ctx.client;
    const kept = vouched !== null ? fromProxy : fromClient;
    const refused = underscored(req.rawHeaders);
    if (refused !== null) dropped.inc({ reason: underscored.reason }, refused.length);
    const drop = refused === null ? kept : new Set([...kept, ...refused]);
    const headers = endToEnd(req.headers, drop, true);
    // A DPoP-bound token is worth nothing without a proof the upstream never gets.
    if (ctx.dpop) delete headers.authorization;
    // A token sent in a cookie or a subprotocol is gatehouse's, as one in Authorization is.
    const carrier = ctx.tokenCarrier;
    if (carrier !== undefined) {
      if (carrier.rest === undefined) delete headers[carrier.field];
      else headers[carrier.field] = carrier.rest;
    }
    if (vouched !== null) {
      // Only what the trusted proxies vouch for is passed on, so the upstream's leftmost hop is
      // the client address gatehouse itself uses.
      headers["x-forwarded-for"] = vouched.length === 0 ? peer : `${vouched.join(", ")}, ${peer}`;
      headers["x-forwarded-proto"] ??= "http";
      headers["x-forwarded-host"] ??= headers.host ?? "";
    } else {
      headers["x-forwarded-for"] = peer;
      headers["x-forwarded-proto"] = "http";
      headers["x-forwarded-host"] = headers.host ?? "";
    }
    headers.host = host;
    // RFC 9110 §7.6.3: an intermediary adds itself to Via.
    headers.via = headers.via === undefined ? "1.1 gatehouse" : `${headers.via}, 1.1 gatehouse`;
    headers["x-request-id"] = ctx.requestId;
    headers.traceparent = formatTraceParent(ctx.traceId, ctx.spanId, ctx.sampled);
    if (ctx.tracestate !== undefined) headers.tracestate = ctx.tracestate;
    if (ctx.clientId !== undefined) headers[identityHeader] = ctx.clientId;
    if (issuerHeader !== "" && ctx.issuer !== undefined) headers[issuerHeader] = ctx.issuer;
    if (scopesHeader !== "" && ctx.scopes !== undefined && ctx.scopes.text !== "") {
      headers[scopesHeader] = ctx.scopes.text;
    }
    // Replaces whatever the client sent: exactly one flag (RFC 9110 §12.5.4).
    if (ctx.language !== undefined) headers["accept-language"] = ctx.language;
    req.headers = headers;
  };
}

/** Picks out, from a request's raw field lines, the names `underscore_headers` refuses. */
interface UnderscoreRule {
  (rawHeaders: readonly string[]): string[] | null;
  /** `gatehouse_request_headers_dropped_total`'s label for what this rule drops. */
  readonly reason: string;
}

/**
 * CGI (RFC 3875 §4.1.18), and WSGI, Rack and PHP after it, hand a request field to the
 * application as `HTTP_` and its name upper-cased with `-` turned into `_`: `X_Client_Id` and
 * `X-Client-Id` reach it as one variable. So a name with `_` is dropped, as nginx does by default;
 * or, when kept, dropped only where it would alias a field gatehouse sets, rewrites or removes.
 * `owned` is those fields' lower-cased names.
 */
function underscoreRule(keep: boolean, owned: readonly string[]): UnderscoreRule {
  const aliased = new Set(owned.map(asVariable));
  const prefixes = OWNED_PREFIXES.map(asVariable);
  const refuses = (name: string): boolean => {
    if (!keep) return true;
    const variable = asVariable(name);
    return aliased.has(variable) || prefixes.some((prefix) => variable.startsWith(prefix));
  };
  // The lower-cased names of refused field lines (a repeated one once per line); null for none.
  // Nearly every request has no `_` in any name, and is answered by one pass over the names.
  const rule = (rawHeaders: readonly string[]): string[] | null => {
    let refused: string[] | null = null;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i] as string;
      if (!name.includes("_")) continue;
      const lower = name.toLowerCase();
      if (refuses(lower)) (refused ??= []).push(lower);
    }
    return refused;
  };
  return Object.assign(rule, { reason: keep ? "alias" : "underscore" });
}

// A lower-cased field name as a CGI-style application reads it, in the same lower case.
function asVariable(name: string): string {
  return name.replaceAll("_", "-");
}
