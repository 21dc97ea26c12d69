import type { AddressSet } from "../http/address-set.js";
import type { Stage } from "../core/context.js";
import { clientFacts } from "../http/client-ip.js";
import type { UntrustedForwarded } from "../http/untrusted-forwarded.js";

/**
 * Works out once who sent the request: the peer, the client address and the hops trusted proxies
 * vouch for; the token endpoint, the bearer stage, the limits and the upstream's headers read it.
 * A request from an untrusted peer that carries forwarding headers is told to `untrusted`, which
 * counts it and warns about the peer once: a proxy missing from `trusted_proxies`.
 */
export function createClientStage(
  trusted: AddressSet | null,
  untrusted: UntrustedForwarded,
): Stage {
  return function client(ctx) {
    const facts = clientFacts(ctx.req, trusted);
    ctx.client = facts;
    if (facts.vouched === null) untrusted.check(ctx.req, facts.peer);
    return undefined;
  };
}
