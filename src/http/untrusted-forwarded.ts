/**
 * Requests that carry X-Forwarded-For or Forwarded from a peer not in `trusted_proxies`. Their
 * hops are not believed, so every client behind that peer is one address for the limits and the
 * failure limit: one client's failures then refuse its neighbours. Most often the peer is the
 * operator's own proxy or load balancer, left out of `trusted_proxies`, so the first request from
 * each such address is logged with how to fix it, and every one is counted.
 */
import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";
import type { Counter } from "prom-client";

/** How many addresses are warned about, at most, per process; later ones are only counted. */
export const WARNED_ADDRESSES = 10_000;

/** Watches requests from peers that are not trusted proxies. */
export interface UntrustedForwarded {
  /** Counts `req`, from the untrusted `peer`, if it carries forwarding headers. */
  check(req: IncomingMessage, peer: string): void;
}

/**
 * Counts in `counter` and warns through `log` once per address, for the first `cap` addresses:
 * any client can send these headers, so the set of addresses warned about must not grow without
 * bound.
 */
export function createUntrustedForwarded(
  log: Logger,
  counter: Counter,
  cap = WARNED_ADDRESSES,
): UntrustedForwarded {
  const warned = new Set<string>();
  let full = false;
  const warn = (peer: string, header: string): void => {
    if (warned.has(peer)) return;
    if (warned.size >= cap) {
      if (full) return;
      full = true;
      log.warn(
        { warned: cap },
        `forwarding headers came from more than ${cap} addresses not in trusted_proxies; later ones are counted in gatehouse_untrusted_forwarded_total, not logged`,
      );
      return;
    }
    warned.add(peer);
    log.warn(
      { address: peer, header },
      `requests from ${peer} carry ${header} but ${peer} is not in trusted_proxies, so their hops are not believed and every client behind it shares one address for the limits and tokens.failure_limit; if it is your proxy or load balancer, add its address range to trusted_proxies`,
    );
  };
  return {
    check(req, peer) {
      const { headers } = req;
      const header =
        headers["x-forwarded-for"] !== undefined
          ? "X-Forwarded-For"
          : headers.forwarded !== undefined
            ? "Forwarded"
            : undefined;
      if (header === undefined) return;
      counter.inc();
      warn(peer, header);
    },
  };
}
