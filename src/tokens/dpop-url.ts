/**
 * The URL a client used to reach gatehouse, as a DPoP proof's `htu` must name it (RFC 9449 §4.3):
 * on a configured origin when there is one (the one the metadata documents publish), else on the
 * request's own: its `Host`, with the scheme the client reached gatehouse by. gatehouse listens in
 * plain HTTP, so that is `http`, unless a trusted proxy says in `X-Forwarded-Proto` that the
 * client reached it in `https`.
 */
import type { RequestContext } from "../core/context.js";
import { normalizedHtu } from "./dpop-proof.js";

// The scheme the client used: the first X-Forwarded-Proto value is the one its own hop wrote.
function schemeOf(ctx: RequestContext): "http" | "https" {
  if (ctx.client.vouched === null) return "http";
  const proto = ctx.req.headers["x-forwarded-proto"];
  if (typeof proto !== "string") return "http";
  const first = proto.split(",", 1)[0] as string;
  return first.trim().toLowerCase() === "https" ? "https" : "http";
}

/**
 * The request's own origin, from `Host` and the scheme the client used; undefined when it names
 * no host: an HTTP/1.0 request may leave Host out, and an empty one is valid (RFC 9112 §3.2), but
 * `http://` followed by the path would read the path's first segment as the host.
 */
export function requestOrigin(ctx: RequestContext): string | undefined {
  const host = ctx.req.headers.host;
  return host === undefined || host === "" ? undefined : `${schemeOf(ctx)}://${host}`;
}

/** The path of the request target as the client sent it, before any canonicalisation. */
export function sentPath(ctx: RequestContext): string {
  const target = ctx.req.url ?? "/";
  if (target.startsWith("/")) {
    const query = target.indexOf("?");
    return query === -1 ? target : target.slice(0, query);
  }
  // RFC 9112 §3.2.2 absolute-form: its path is the one to compare.
  return URL.canParse(target) ? new URL(target).pathname : target;
}

/**
 * The URL a proof's `htu` is compared with, normalised as `normalizedHtu` does: `path` on
 * `origin` (a configured URL's origin), or on the request's own origin when there is none. ""
 * when the request's `Host` is missing or empty or makes no URL, which no `htu` equals.
 */
export function expectedHtu(origin: string | undefined, ctx: RequestContext, path: string): string {
  const base = origin ?? requestOrigin(ctx);
  return base === undefined ? "" : (normalizedHtu(base + path) ?? "");
}
