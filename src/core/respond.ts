/** Writes gatehouse's own answers; the one place a Reply becomes bytes on the wire. */
import type { OutgoingHttpHeaders } from "node:http";
import type { Reply, RequestContext } from "./context.js";
import type { Lifecycle } from "./services.js";

/**
 * Adds the headers every response to this request carries (request id, limit headers, Vary)
 * to `headers`, replacing same-named ones; `Vary` is merged. While draining, asks to close.
 */
export function finalHeaders(
  ctx: RequestContext,
  headers: OutgoingHttpHeaders,
  lifecycle: Lifecycle,
): OutgoingHttpHeaders {
  const extra = ctx.responseHeaders;
  for (const name in extra) {
    const value = extra[name] as string;
    if (name === "vary") headers.vary = mergeVary(headers.vary, value);
    else headers[name] = value;
  }
  headers["x-request-id"] = ctx.requestId;
  if (lifecycle.draining) headers.connection = "close";
  return headers;
}

function mergeVary(existing: OutgoingHttpHeaders[string], add: string): string {
  if (existing === undefined) return add;
  const current = Array.isArray(existing) ? existing.join(", ") : String(existing);
  if (current.trim() === "*") return current;
  const names = current.split(",").map((n) => n.trim().toLowerCase());
  return names.includes(add.toLowerCase()) ? current : `${current}, ${add}`;
}

/** Sends a Reply: JSON bodies get `Content-Type: application/json`. */
export function sendReply(ctx: RequestContext, reply: Reply, lifecycle: Lifecycle): void {
  const { res } = ctx;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  let body: string | Buffer | undefined;
  const headers: OutgoingHttpHeaders = { ...reply.headers };
  if (reply.body !== undefined) {
    if (typeof reply.body === "string" || Buffer.isBuffer(reply.body)) {
      body = reply.body;
    } else {
      body = JSON.stringify(reply.body);
      headers["content-type"] ??= "application/json";
    }
    headers["content-length"] = Buffer.byteLength(body);
  } else {
    headers["content-length"] = 0;
  }
  res.writeHead(reply.status, finalHeaders(ctx, headers, lifecycle));
  if (ctx.req.method === "HEAD") res.end();
  else res.end(body);
}
