/**
 * `trusted-proxies`: gatehouse behind proxies it trusts. Side by side with the bare forwarder, as
 * `forward`: two gatehouse processes whose `trusted_proxies` are 127.0.0.1 and 10.0.0.0/8 are sent
 * requests whose X-Forwarded-For names the client behind a trusted hop, on an `auth: none` route
 * whose anonymous plan counts that client (a rate limit never reached, in the memory store), so
 * the address worked out from the chain is used; the bare forwarders get the same requests.
 */
import {
  configHead,
  NEVER_REACHED,
  OPEN_ROUTE,
  startConfigured,
  type LimitsContext,
} from "./limits-kit.js";
import type { Served } from "./processes.js";
import type { Pairing } from "./scenarios.js";

// The bench's own address and a load balancer's network.
const TRUSTED = ["127.0.0.1/32", "10.0.0.0/8"];
// A client behind one trusted load balancer: gatehouse walks the chain from the right, past
// 10.0.0.2 (trusted) to 203.0.113.7, the client it counts.
const HEADERS = { "x-forwarded-for": "203.0.113.7, 10.0.0.2" };

function trustingConfig(listen: string, adminListen: string, context: LimitsContext): string {
  return `${configHead(listen, adminListen, context, TRUSTED)}plans:
  anonymous:
    rate_limit: { limit: ${NEVER_REACHED}, window: 1h }
limits:
  store: memory
`;
}

/** Starts the two trusting gatehouse processes and pairs them with the run's bare forwarders. */
export async function prepareTrustedProxies(
  context: LimitsContext,
  bares: readonly Served[],
): Promise<Pairing> {
  const pair: Served[] = [];
  for (const name of ["gatehouse trusted-proxies", "gatehouse trusted-proxies twin"]) {
    const admin = await startConfigured(name, context, (listen, adminListen) =>
      trustingConfig(listen, adminListen, context),
    );
    context.adopt(admin.served);
    pair.push(admin.served);
  }
  return {
    baseline: { label: "bare http-proxy-3", served: bares, path: OPEN_ROUTE, headers: HEADERS },
    candidate: {
      label: "gatehouse, trusted proxies",
      served: pair,
      path: OPEN_ROUTE,
      headers: HEADERS,
    },
  };
}
