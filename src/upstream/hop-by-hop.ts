/** RFC 9110 §7.6.1: connection-specific fields are removed by every intermediary, both ways. */
import type { IncomingHttpHeaders } from "node:http";

const REQUEST_HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "upgrade",
  "http2-settings",
  // The client's 100-continue was answered here; the upstream must not answer it again.
  "expect",
];

const RESPONSE_HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "te",
  "trailer",
  "upgrade",
  // Node frames the response to the client itself (chunked, or close-delimited for HTTP/1.0).
  "transfer-encoding",
];

function removeConnectionNamed(headers: IncomingHttpHeaders): void {
  const named = headers.connection;
  if (named === undefined) return;
  for (const name of named.split(",")) {
    const key = name.trim().toLowerCase();
    // Never let Connection remove the framing of the message itself.
    if (key !== "" && key !== "transfer-encoding" && key !== "content-length") delete headers[key];
  }
}

/**
 * Removes hop-by-hop fields from a request's headers in place: those named in Connection first,
 * then the fixed list and every `Proxy-*` field. Transfer-Encoding stays: it frames the body
 * that is streamed on, and Node re-frames it towards the upstream.
 */
export function stripRequestHopByHop(headers: IncomingHttpHeaders): void {
  removeConnectionNamed(headers);
  for (const name of REQUEST_HOP_BY_HOP) delete headers[name];
  for (const name in headers) {
    if (name.charCodeAt(0) === 112 /* p */ && name.startsWith("proxy-")) delete headers[name];
  }
}

/** Removes hop-by-hop fields from an upstream response's headers in place. */
export function stripResponseHopByHop(headers: IncomingHttpHeaders): void {
  removeConnectionNamed(headers);
  for (const name of RESPONSE_HOP_BY_HOP) delete headers[name];
}
