/**
 * Who may use the admin API: with `admin_token_env` set, every request but `GET /metrics` needs
 * `Authorization: Bearer TOKEN` (RFC 6750); without one, a listener reachable from elsewhere than
 * loopback refuses the requests that change counters.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { errorReply } from "../core/context.js";
import type { AdminAnswer } from "./limits.js";

/** Whether `host` (as in `admin_listen`) is reachable only from this machine. */
export function isLoopback(host: string): boolean {
  if (host === "localhost" || host === "::1") return true;
  return isIP(host) === 4 && host.startsWith("127.");
}

// Digests compared in constant time, whatever the lengths (timingSafeEqual needs equal lengths).
function sameToken(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/**
 * The refusal for an admin request, or undefined when it may go on. `metrics` says whether it is
 * `GET /metrics`, which Prometheus scrapes without a token.
 */
export function adminRefusal(
  method: string,
  metrics: boolean,
  authorization: string | undefined,
  token: string | undefined,
  listenHost: string,
): AdminAnswer | undefined {
  if (metrics) return undefined;
  if (token !== undefined) {
    const given = /^Bearer +(\S+)$/i.exec(authorization ?? "")?.[1];
    if (given !== undefined && sameToken(given, token)) return undefined;
    return errorReply(401, "unauthorized", "the admin API needs its bearer token", {
      "www-authenticate": 'Bearer realm="gatehouse-admin"',
    });
  }
  if (method !== "GET" && method !== "HEAD" && !isLoopback(listenHost)) {
    return errorReply(
      403,
      "admin_token_required",
      "admin_listen is reachable from other machines: set admin_token_env to change counters",
    );
  }
  return undefined;
}
