/** The headers the upstream receives: the only place the outgoing request's headers change. */
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

/** Builds, once per config, the function that writes the upstream's request headers. */
export function createUpstreamHeaders(upstream: UpstreamSettings): (ctx: RequestContext) => void {
  // What is never copied from the client: hop-by-hop fields, the identity, issuer and scopes
  // headers gatehouse owns (X-Client-Scopes and X-Client-Issuer even when not sent, so an
  // upstream that reads them is never fooled), the bearer token unless it is to be passed on; and from an untrusted peer,
  // forwarding claims.
  // The request id and the language are always gatehouse's own (the language stage runs on every
  // forwarded request), so they are added after the client's fields rather than overwritten in
  // place: every request then has its own fields in one order, whatever the client sent.
  // So are the trace context fields: the upstream's parent is gatehouse's span, and a tracestate
  // goes on only with the trace it belongs to.
  const { identityHeader, scopesHeader, issuerHeader } = upstream;
  const own = [
    ...REQUEST_HOP_BY_HOP,
    identityHeader,
    "x-request-id",
    "accept-language",
    "traceparent",
    "tracestate",
  ];
  own.push(scopesHeader === "" ? "x-client-scopes" : scopesHeader);
  own.push(issuerHeader === "" ? "x-client-issuer" : issuerHeader);
  if (!upstream.forwardAuthorization) own.push("authorization");
  const fromProxy = new Set(own);
  // The upstream's own authority, as nginx's proxy_pass sends it; the client's goes in
  // X-Forwarded-Host.
  const host = upstream.url.host;
  const fromClient = new Set([...own, ...FORWARDING_CLAIMS]);

  /**
   * Replaces `ctx.req.headers` with what the upstream receives: the client's end-to-end fields
   * first, then gatehouse's own, so a client can neither remove them nor supply them.
   */
  return function upstreamHeaders(ctx) {
    const { req } = ctx;
    const { peer, vouched } = ctx.client;
    const headers = endToEnd(req.headers, vouched !== null ? fromProxy : fromClient, true);
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
