/**
 * Who may use the admin API: with `admin_token_env` set, every request but `GET /metrics` needs
 * `Authorization: Bearer TOKEN` (RFC 6750); without one, a listener reachable from elsewhere than
 * loopback refuses the requests that change counters.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
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
): (AdminAnswer & { readonly headers?: Record<string, string> }) | undefined {
  if (metrics) return undefined;
  if (token !== undefined) {
    const given = /^Bearer +(\S+)$/i.exec(authorization ?? "")?.[1];
    if (given !== undefined && sameToken(given, token)) return undefined;
    return {
      status: 401,
      headers: { "www-authenticate": 'Bearer realm="gatehouse-admin"' },
      body: { error: "unauthorized", message: "the admin API needs its bearer token" },
    };
  }
  if (method !== "GET" && method !== "HEAD" && !isLoopback(listenHost)) {
    return {
      status: 403,
      body: {
        error: "admin_token_required",
        message:
          "admin_listen is reachable from other machines: set admin_token_env to change counters",
      },
    };
  }
  return undefined;
}
