/**
 * RFC 9110 §7.6.1: connection-specific fields are removed by every intermediary, both ways.
 * Headers are copied into a new object without them, rather than deleted in place: deleting
 * turns the object into a slow dictionary that every later reader pays for.
 */
import type { IncomingHttpHeaders } from "node:http";

/** Request fields that never go upstream as the client sent them. */
export const REQUEST_HOP_BY_HOP: readonly string[] = [
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

/** Response fields that never go back to the client as the upstream sent them. */
export const RESPONSE_HOP_BY_HOP: readonly string[] = [
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

/** The fields a Connection header names, lower-cased; null when it names none worth removing. */
function connectionNamed(value: string | undefined): Set<string> | null {
  // The values nearly every message carries name nothing but themselves.
  if (value === undefined || value === "keep-alive" || value === "close") return null;
  const named = new Set<string>();
  for (const name of value.split(",")) {
    const key = name.trim().toLowerCase();
    // Never let Connection remove the framing of the message itself.
    if (key !== "" && key !== "transfer-encoding" && key !== "content-length") named.add(key);
  }
  return named;
}

/**
 * Copies the end-to-end fields of `source`: not in `drop`, not named in its Connection field,
 * and, when `dropProxyFields`, no `Proxy-*` field. Transfer-Encoding of a request is kept by the
 * caller's `drop`: it frames the body streamed on, which the upstream connection sends chunked.
 */
export function endToEnd(
  source: IncomingHttpHeaders,
  drop: ReadonlySet<string>,
  dropProxyFields: boolean,
): IncomingHttpHeaders {
  const named = connectionNamed(source.connection);
  const copy: IncomingHttpHeaders = {};
  for (const name in source) {
    if (drop.has(name) || (named !== null && named.has(name))) continue;
    if (dropProxyFields && name.charCodeAt(0) === 112 /* p */ && name.startsWith("proxy-"))
      continue;
    copy[name] = source[name];
  }
  return copy;
}
