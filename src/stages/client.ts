import type { AddressSet } from "../http/address-set.js";
import type { Stage } from "../core/context.js";
import { clientFacts } from "../http/client-ip.js";

/**
 * Works out once who sent the request: the peer, the client address and the hops trusted proxies
 * vouch for; the token endpoint, the bearer stage, the limits and the upstream's headers read it.
 */
export function createClientStage(trusted: AddressSet | null): Stage {
  return function client(ctx) {
    ctx.client = clientFacts(ctx.req, trusted);
    return undefined;
  };
}
