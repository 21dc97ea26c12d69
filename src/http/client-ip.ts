/** The client's address: the socket peer, or through trusted proxies the rightmost untrusted hop. */
import { isIPv4, isIPv6 } from "node:net";
import type { IncomingMessage } from "node:http";
import { parseIPv4, type AddressSet } from "./address-set.js";

/** Folds IPv4-mapped IPv6 (`::ffff:203.0.113.7`) to IPv4 so both spellings are one client. */
export function normalizeAddress(address: string): string {
  if (
    address.charCodeAt(0) === 58 /* : */ &&
    address.length > 7 &&
    address.slice(0, 7).toLowerCase() === "::ffff:" &&
    isIPv4(address.slice(7))
  ) {
    return address.slice(7);
  }
  return address;
}

/** The peer address of the connection, IPv4-mapped addresses folded. */
export function peerAddress(req: IncomingMessage): string {
  return normalizeAddress(req.socket.remoteAddress ?? "");
}

// A port after a hop's address: what some proxies (Azure Application Gateway, IIS ARR) append.
const PORT = /^:[0-9]{1,5}$/;

/**
 * The address a hop names, or undefined when it names none: `IP`, `IPv4:port`, `[IPv6]` or
 * `[IPv6]:port` (the forms RFC 7239 §6 gives a node, which proxies also write into
 * X-Forwarded-For), IPv4-mapped addresses folded. Read without the port, so one client's
 * connections from different ports are one client.
 */
export function hopAddress(hop: string): string | undefined {
  let address = hop;
  if (hop.charCodeAt(0) === 91 /* [ */) {
    const end = hop.indexOf("]");
    const rest = hop.slice(end + 1);
    if (end === -1 || (rest !== "" && !PORT.test(rest))) return undefined;
    address = hop.slice(1, end);
    if (!isIPv6(address)) return undefined;
  } else {
    const colon = hop.indexOf(":");
    // One colon: IPv4 with a port (an IPv6 address without brackets has at least two).
    if (colon !== -1 && colon === hop.lastIndexOf(":")) {
      if (!PORT.test(hop.slice(colon))) return undefined;
      address = hop.slice(0, colon);
      if (parseIPv4(address) === -1) return undefined;
    }
  }
  address = normalizeAddress(address);
  return parseIPv4(address) === -1 && !isIPv6(address) ? undefined : address;
}

/**
 * The X-Forwarded-For hops that trusted proxies vouch for, left to right: walking from the right,
 * every trusted hop and then the first untrusted one (the client). What lies left of the client
 * was written by the client itself and is not believed. Each hop is its address, without a port.
 * Empty when the header is absent or a hop that would be believed is not an address.
 */
export function vouchedHops(req: IncomingMessage, trusted: AddressSet): string[] {
  const forwarded = req.headers["x-forwarded-for"];
  if (typeof forwarded !== "string") return [];
  const hops = forwarded.split(",");
  const vouched: string[] = [];
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hopAddress((hops[i] as string).trim());
    if (hop === undefined) return [];
    vouched.push(hop);
    if (!trusted.has(hop)) break;
  }
  return vouched.reverse();
}

/** Who sent a request, worked out once when it arrives. */
export interface ClientFacts {
  /** The connection's peer, IPv4-mapped addresses folded. */
  readonly peer: string;
  /** The client address: the peer, or through trusted proxies the rightmost untrusted hop. */
  readonly address: string;
  /** The X-Forwarded-For hops the trusted proxies vouch for; null when the peer is not trusted. */
  readonly vouched: readonly string[] | null;
}

/**
 * The client's facts (nginx `real_ip_recursive on`, Envoy `xff_num_trusted_hops`): when the peer
 * is a trusted proxy, walk X-Forwarded-For from the right and take the first untrusted hop.
 */
export function clientFacts(req: IncomingMessage, trusted: AddressSet | null): ClientFacts {
  const peer = peerAddress(req);
  if (trusted === null || !trusted.has(peer)) return { peer, address: peer, vouched: null };
  const vouched = vouchedHops(req, trusted);
  return { peer, address: vouched[0] ?? peer, vouched };
}
