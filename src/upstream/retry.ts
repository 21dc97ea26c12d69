/**
 * When a failed upstream exchange is sent again. A pooled keep-alive connection can be closed by
 * the upstream (its idle timeout ran out) just as gatehouse writes the next request to it; that
 * request fails before the upstream read it, and a new connection would have served it. As nginx
 * does (`proxy_next_upstream error`), such a request is retried once when retrying cannot do
 * harm: RFC 9112 §9.3.1 forbids a proxy to retry a non-idempotent request automatically.
 */
import type { RequestContext } from "../core/context.js";
import { closedConnection } from "./failures.js";

// RFC 9110 §9.2.2: repeating these has the effect of sending them once.
const IDEMPOTENT: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "OPTIONS",
  "TRACE",
  "PUT",
  "DELETE",
]);

/** One attempt at an upstream exchange, as far as a retry is concerned. */
export interface Attempt {
  readonly ctx: RequestContext;
  readonly timedOut: boolean;
  /** Some of the upstream's answer (a 1xx at least) arrived: the upstream read the request. */
  readonly answered: boolean;
  readonly retried: boolean;
  /** The request has a body to stream (an empty one, `Content-Length: 0`, is none). */
  readonly withBody: boolean;
}

/**
 * Whether the attempt that failed with `error` is sent again: only once, only when the
 * connection closed before any answer, and only for an idempotent request without a body. A body
 * is streamed to the upstream as it arrives and never kept, so a request that had one cannot be
 * sent again; an empty one (`Content-Length: 0`) can.
 */
export function retriesOnNewConnection(attempt: Attempt, error: Error): boolean {
  if (attempt.retried || attempt.timedOut || attempt.answered) return false;
  if (attempt.withBody || !closedConnection(error)) return false;
  return IDEMPOTENT.has(attempt.ctx.req.method ?? "");
}
