/**
 * The heads of upstream exchanges: the request head gatehouse writes, and the response fields it
 * reads, each as Node's HTTP client wrote and read them.
 */
import type { IncomingHttpHeaders } from "node:http";

// RFC 9110 §5.5: a field value is visible characters, spaces, tabs and obs-text; a CR or LF would
// end the field line (and start a field of the value's choosing). Node's own check.
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

// Methods for which RFC 9110 defines no meaning of content: sent without framing when bodiless.
const NO_CONTENT_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "DELETE",
  "OPTIONS",
  "TRACE",
  "CONNECT",
]);

/**
 * Whether `text` holds only what a field value or a reason phrase may (RFC 9110 §5.5, RFC 9112
 * §4): Node's server refuses to write anything else, and llhttp lets a DEL through in a reason
 * phrase.
 */
export function isFieldText(text: string): boolean {
  return !INVALID_VALUE.test(text);
}

/** A request field value gatehouse refuses to write. */
export class InvalidFieldValue extends Error {
  readonly code = "ERR_INVALID_CHAR";
  constructor(name: string) {
    super(`invalid character in the value of the upstream request field "${name}"`);
  }
}

/**
 * The request head up to its `Connection` field (`CONNECTION_KEPT` or `CONNECTION_CLOSED` ends
 * it): `headers` as they are, framing fields included. A bodiless request whose method gives
 * content a meaning says `Content-Length: 0` (RFC 9110 §8.6), so the upstream need not wonder
 * whether a body follows.
 */
export function requestHead(method: string, target: string, headers: IncomingHttpHeaders): string {
  let head = `${method} ${target} HTTP/1.1\r\n`;
  for (const name in headers) {
    const value = headers[name];
    if (typeof value === "string") head += fieldLine(name, value);
    else if (value !== undefined) for (const line of value) head += fieldLine(name, line);
  }
  if (
    headers["content-length"] === undefined &&
    headers["transfer-encoding"] === undefined &&
    !NO_CONTENT_METHODS.has(method)
  ) {
    head += "Content-Length: 0\r\n";
  }
  return head;
}

/** The end of a request head on a connection kept for the next exchange. */
export const CONNECTION_KEPT = "Connection: keep-alive\r\n\r\n";
/** The end of a request head on a connection closed after its exchange. */
export const CONNECTION_CLOSED = "Connection: close\r\n\r\n";

function fieldLine(name: string, value: string): string {
  if (INVALID_VALUE.test(value)) throw new InvalidFieldValue(name);
  return `${name}: ${value}\r\n`;
}

// Fields that can hold one value: a repeated line after the first is dropped (Node's rule).
const SINGLE: ReadonlySet<string> = new Set([
  "content-type",
  "content-length",
  "user-agent",
  "referer",
  "host",
  "authorization",
  "proxy-authorization",
  "if-modified-since",
  "if-unmodified-since",
  "from",
  "location",
  "max-forwards",
  "retry-after",
  "etag",
  "last-modified",
  "server",
  "age",
  "expires",
]);

/**
 * A response's field lines (name, value, name, value) as one object of lower-cased names:
 * `Set-Cookie` lines as a list (RFC 9110 §5.3 says they cannot be combined), a repeated
 * single-valued field as its first line, any other repeated field as one comma-separated list.
 */
export function responseHeaders(lines: readonly string[]): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = {};
  for (let i = 0; i < lines.length; i += 2) {
    const name = (lines[i] as string).toLowerCase();
    const value = lines[i + 1] as string;
    const existing = headers[name];
    if (existing === undefined) {
      headers[name] = name === "set-cookie" ? [value] : value;
    } else if (name === "set-cookie") {
      (existing as string[]).push(value);
    } else if (!SINGLE.has(name)) {
      headers[name] = `${existing as string}, ${value}`;
    }
  }
  return headers;
}
