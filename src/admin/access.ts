/**
 * Who may use the admin API. Observability endpoints (/metrics, /version) are open to whoever
 * reaches the listener; operator endpoints (/config, /limits) need `Authorization: Bearer TOKEN`
 * (RFC 6750) when `admin_token_env` is set, and are closed on a listener reachable from elsewhere
 * than loopback when it is not. Before either, the `Host` must name this listener, so that a web
 * page cannot reach it through DNS rebinding.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";
import { errorReply } from "../core/context.js";
import type { AdminAnswer } from "./limits.js";

/** What an admin endpoint shows or changes: Prometheus's view, or an operator's. */
export type AdminKind = "observability" | "operator";

/** Whether `host` (as in `admin_listen`) is reachable only from this machine. */
export function isLoopback(host: string): boolean {
  if (host === "localhost" || host === "::1") return true;
  return isIP(host) === 4 && host.startsWith("127.");
}

// RFC 9110 §7.2: Host is uri-host [":" port]; an IPv6 literal is bracketed (RFC 3986 §3.2.2).
const BRACKETED = /^\[([^\]]+)\](?::\d*)?$/;
const NAME_AND_PORT = /^([^:[\]]+)(?::\d*)?$/;

/**
 * Whether a `Host` value names this listener: an IP literal, `localhost`, or one of `names`
 * (lower-cased), any port. A page that rebinds its own name to this address still sends its name.
 */
export function isAdminHost(host: string | undefined, names: readonly string[]): boolean {
  if (host === undefined) return false;
  const bracketed = BRACKETED.exec(host);
  if (bracketed !== null) return isIP(bracketed[1] as string) === 6;
  const name = NAME_AND_PORT.exec(host)?.[1]?.toLowerCase();
  if (name === undefined) return false;
  return isIP(name) === 4 || name === "localhost" || names.includes(name);
}

// Digests compared in constant time, whatever the lengths (timingSafeEqual needs equal lengths).
function sameToken(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** The refusal for a request to an endpoint of `kind`, or undefined when it may go on. */
export function adminRefusal(
  kind: AdminKind,
  authorization: string | undefined,
  token: string | undefined,
  listenHost: string,
): AdminAnswer | undefined {
  if (kind === "observability") return undefined;
  if (token !== undefined) {
    const given = /^Bearer +(\S+)$/i.exec(authorization ?? "")?.[1];
    if (given !== undefined && sameToken(given, token)) return undefined;
    return errorReply(401, "unauthorized", "the admin API needs its bearer token", {
      "www-authenticate": 'Bearer realm="gatehouse-admin"',
    });
  }
  if (!isLoopback(listenHost)) {
    return errorReply(
      403,
      "admin_token_required",
      "admin_listen is reachable from other machines: set admin_token_env to use /config and /limits",
    );
  }
  return undefined;
}
