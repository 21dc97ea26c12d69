/**
 * The upstream's 1xx informational responses (RFC 9110 §15.2), relayed to the client. Node has
 * public writers only for 100, 102 and 103 (and its 103 writer drops hints without `Link`); this
 * module is the one place that writes any interim head, through `ServerResponse#_writeRaw`, the
 * private writer those public ones use. A test guards it across Node versions.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { endToEnd, RESPONSE_HOP_BY_HOP } from "./hop-by-hop.js";

// RFC 9110 §8.6 and §6.4.1: a 1xx has no content, so it carries no framing fields.
const INFORMATIONAL_DROPPED: ReadonlySet<string> = new Set([
  ...RESPONSE_HOP_BY_HOP,
  "content-length",
]);

interface RawWriter {
  _writeRaw(data: string, encoding: BufferEncoding): boolean;
}

/**
 * Whether the upstream's 1xx goes on to the client that sent `req`. A 100 Continue never comes
 * here: undici fails the exchange on one (gatehouse never sends `Expect` upstream).
 */
export function relaysInformational(req: IncomingMessage): boolean {
  // RFC 9110 §15.2: an HTTP/1.0 client does not understand 1xx responses.
  return req.httpVersionMinor !== 0;
}

/** Writes the upstream's 1xx to the client, without hop-by-hop or framing fields. */
export function writeInformational(
  res: ServerResponse,
  status: number,
  message: string,
  fields: IncomingHttpHeaders,
): void {
  const headers = endToEnd(fields, INFORMATIONAL_DROPPED, false);
  let head = `HTTP/1.1 ${status} ${message}\r\n`;
  for (const name in headers) {
    const value = headers[name];
    if (Array.isArray(value)) for (const line of value) head += `${name}: ${line}\r\n`;
    else if (value !== undefined) head += `${name}: ${value}\r\n`;
  }
  (res as unknown as RawWriter)._writeRaw(`${head}\r\n`, "latin1");
}
