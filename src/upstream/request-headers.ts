/** The headers the upstream receives: the only place the outgoing request's headers change. */
import type { BlockList } from "node:net";
import type { UpstreamSettings } from "../config/snapshot.js";
import { fromTrustedProxy, peerAddress, vouchedHops } from "../http/client-ip.js";
import type { RequestContext } from "../pipeline/context.js";
import { stripRequestHopByHop } from "./hop-by-hop.js";

// RFC 7239 §8 and Envoy's use_remote_address: a client's own forwarding claims are believed only
// from a trusted proxy.
const FORWARDING_CLAIMS = [
  "forwarded",
  "x-real-ip",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
];

/**
 * Rewrites `ctx.req.headers` for the upstream, in order: hop-by-hop fields (and those named in
 * Connection) go first, then gatehouse's own fields are set, so a client can neither remove them
 * nor supply them.
 */
export function prepareUpstreamHeaders(
  ctx: RequestContext,
  upstream: UpstreamSettings,
  trusted: BlockList | null,
): void {
  const { req } = ctx;
  const headers = req.headers;
  stripRequestHopByHop(headers);

  const peer = peerAddress(req);
  if (trusted !== null && fromTrustedProxy(req, trusted)) {
    // Only what the trusted proxies vouch for is passed on, so the upstream's leftmost hop is the
    // client address gatehouse itself uses (D6).
    const hops = vouchedHops(req, trusted);
    hops.push(peer);
    headers["x-forwarded-for"] = hops.join(", ");
    headers["x-forwarded-proto"] ??= "http";
    headers["x-forwarded-host"] ??= headers.host ?? "";
  } else {
    for (const name of FORWARDING_CLAIMS) delete headers[name];
    headers["x-forwarded-for"] = peer;
    headers["x-forwarded-proto"] = "http";
    headers["x-forwarded-host"] = headers.host ?? "";
  }
  // RFC 9110 §7.6.3: an intermediary adds itself to Via.
  headers.via = headers.via === undefined ? "1.1 gatehouse" : `${headers.via}, 1.1 gatehouse`;
  headers["x-request-id"] = ctx.requestId;

  delete headers[upstream.identityHeader];
  if (ctx.clientId !== undefined) headers[upstream.identityHeader] = ctx.clientId;
  if (!upstream.forwardAuthorization) delete headers.authorization;
  // Replaces whatever the client sent: exactly one flag (RFC 9110 §12.5.4).
  if (ctx.language !== undefined) headers["accept-language"] = ctx.language;
}
