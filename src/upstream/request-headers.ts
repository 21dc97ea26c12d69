/** The headers the upstream receives: the only place the outgoing request's headers change. */
import type { BlockList } from "node:net";
import type { UpstreamSettings } from "../config/snapshot.js";
import { peerAddress } from "../http/client-ip.js";
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

function fromTrustedProxy(trusted: BlockList | null, peer: string): boolean {
  if (trusted === null) return false;
  return trusted.check(peer, peer.includes(":") ? "ipv6" : "ipv4");
}

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
  if (fromTrustedProxy(trusted, peer)) {
    const prior = headers["x-forwarded-for"];
    headers["x-forwarded-for"] =
      typeof prior === "string" && prior !== "" ? `${prior}, ${peer}` : peer;
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
