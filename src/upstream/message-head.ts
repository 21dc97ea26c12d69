/** The response heads gatehouse relays: which characters may be written, and repeated fields. */
import type { IncomingHttpHeaders } from "node:http";

// RFC 9110 §5.5: a field value is visible characters, spaces, tabs and obs-text; a CR or LF would
// end the field line (and start a field of the value's choosing). Node's own check.
const INVALID_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/**
 * Whether `text` holds only what a field value or a reason phrase may (RFC 9110 §5.5, RFC 9112
 * §4): Node's server refuses to write anything else, and llhttp lets a DEL through in a reason
 * phrase.
 */
export function isFieldText(text: string): boolean {
  return !INVALID_VALUE.test(text);
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
 * A response's fields as undici parses them (lower-cased names, a repeated field as a list of
 * its lines) as the client receives them: `Set-Cookie` lines as a list (RFC 9110 §5.3 says they
 * cannot be combined), a repeated single-valued field as its first line, any other repeated field
 * as one comma-separated list (RFC 9110 §5.3).
 */
export function responseHeaders(
  fields: Readonly<Record<string, string | string[] | undefined>>,
): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = {};
  for (const name in fields) {
    const value = fields[name];
    // A field named __proto__ would replace the object's prototype rather than be one of it.
    if (value === undefined || name === "__proto__") continue;
    if (typeof value === "string") headers[name] = name === "set-cookie" ? [value] : value;
    else if (name === "set-cookie") headers[name] = value;
    else headers[name] = SINGLE.has(name) ? value[0] : value.join(", ");
  }
  return headers;
}
