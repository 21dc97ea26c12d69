/** Prometheus metrics (docs/operations.md), one registry per process so tests can run several gatehouses. */
import { Counter, Gauge, Registry, collectDefaultMetrics } from "prom-client";
import { RequestMetrics } from "./request-metrics.js";

const LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/** Every metric gatehouse exports. */
export interface Metrics {
  readonly registry: Registry;
  /** Requests answered, their durations and the upstream's. */
  readonly requests: RequestMetrics;
  readonly configReloads: Counter<"result">;
  readonly configHash: Gauge<"hash">;
  readonly tokensIssued: Counter<string>;
  readonly authFailures: Counter<"reason">;
  /** Failed client authentications by listed client id (`unknown` for the rest). */
  readonly tokenFailures: Counter<"client">;
  /** Client secret checks: scrypt ran (match, mismatch), or did not (remembered, busy). */
  readonly secretVerifications: Counter<"result">;
  /** Secret verifications waiting for a turn within `tokens.verify_concurrency`. */
  readonly secretVerificationsWaiting: Gauge;
  /** Requests over a limit, by refusal, plan and limit name (`quota` for the quota). */
  readonly limitRefusals: Counter<"refusal" | "dry_run" | "plan" | "limit">;
  /** Allowed requests that left 20% or less of a limit. */
  readonly limitNear: Counter<"plan" | "limit">;
  /** 1 while the Redis store answers (absent with the memory store). */
  readonly limiterStoreUp: Gauge;
  readonly limiterStoreErrors: Counter<"on_outage">;
  readonly limiterFallbacks: Counter;
  /** Network round trips to Redis made to count or read requests' limits. */
  readonly limiterRoundTrips: Counter;
  /** Refusals answered from a replica's record of Redis's refusals, without asking Redis. */
  readonly limiterLocalBlocks: Counter;
  /** Fetches of a trusted issuer's keys (its metadata and JWKS), by issuer name and result. */
  readonly issuerKeyFetches: Counter<"issuer" | "result">;
  /** Bearer tokens whose signature and claims were checked and accepted, by issuer name. */
  readonly bearerTokensVerified: Counter<"issuer">;
  /** Request headers not forwarded for a `_` in their name, by reason (underscore, alias). */
  readonly requestHeadersDropped: Counter<"reason">;
  /** Requests with X-Forwarded-For or Forwarded from a peer not in `trusted_proxies`. */
  readonly untrustedForwarded: Counter;
  /** Spans that could not be exported: the queue was full, or their export failed or timed out. */
  readonly traceSpansDropped: Counter;
  /** Forwarded requests the upstream failed (answered 502 or 504, or cut mid-answer), by reason. */
  readonly upstreamFailures: Counter<"reason">;
  /** Open WebSocket connections, by route. */
  readonly websocketConnections: Gauge<"route">;
  /** Bytes relayed on WebSocket connections, by route and direction (in: from the client). */
  readonly websocketBytes: Counter<"route" | "direction">;
  /** Ended WebSocket connections, by route, who closed them and why. */
  readonly websocketCloses: Counter<"route" | "closed_by" | "reason">;
}

const STORE_UP = "gatehouse_limiter_store_up";

/** Exports `gatehouse_limiter_store_up` only while the store in force is Redis. */
export function showLimiterStoreUp(metrics: Metrics, shown: boolean): void {
  const registered = metrics.registry.getSingleMetric(STORE_UP) !== undefined;
  if (shown && !registered) metrics.registry.registerMetric(metrics.limiterStoreUp);
  if (!shown && registered) metrics.registry.removeSingleMetric(STORE_UP);
}

/** The token endpoint's client authentication metrics (docs/tokens.md). */
function clientAuthMetrics(
  registry: Registry,
): Pick<Metrics, "tokenFailures" | "secretVerifications" | "secretVerificationsWaiting"> {
  return {
    tokenFailures: new Counter({
      name: "gatehouse_token_failures_total",
      help: 'Failed client authentications at the token endpoint, by client id ("unknown": not listed).',
      labelNames: ["client"],
      registers: [registry],
    }),
    secretVerifications: new Counter({
      name: "gatehouse_secret_verifications_total",
      help: "Client secret checks: match and mismatch ran scrypt; remembered was a secret that matched before; busy waited 1 s for a turn and got 503.",
      labelNames: ["result"],
      registers: [registry],
    }),
    secretVerificationsWaiting: new Gauge({
      name: "gatehouse_secret_verifications_waiting",
      help: "Client secret verifications waiting for a turn (tokens.verify_concurrency run at once).",
      registers: [registry],
    }),
  };
}

/** The bearer tokens' issuers: a provider's key fetches, the tokens verified per issuer. */
function issuerMetrics(
  registry: Registry,
): Pick<Metrics, "issuerKeyFetches" | "bearerTokensVerified"> {
  return {
    issuerKeyFetches: new Counter({
      name: "gatehouse_issuer_keys_fetch_total",
      help: "Fetches of a trusted issuer's keys, by issuer name and result (ok, or why it failed).",
      labelNames: ["issuer", "result"],
      registers: [registry],
    }),
    bearerTokensVerified: new Counter({
      name: "gatehouse_bearer_tokens_verified_total",
      help: 'Bearer tokens verified (signature and claims; not the ones answered from the cache), by issuer name ("own": gatehouse\'s).',
      labelNames: ["issuer"],
      registers: [registry],
    }),
  };
}

/**
 * What gatehouse chose not to believe or pass on: forwarding headers from a peer it does not
 * trust, request headers, and spans it could not export.
 */
function droppedMetrics(
  registry: Registry,
): Pick<Metrics, "untrustedForwarded" | "requestHeadersDropped" | "traceSpansDropped"> {
  return {
    untrustedForwarded: new Counter({
      name: "gatehouse_untrusted_forwarded_total",
      help: "Requests carrying X-Forwarded-For or Forwarded from a peer not in trusted_proxies, whose hops were not believed (the first 10000 such peers are each named once in the log).",
      registers: [registry],
    }),
    requestHeadersDropped: new Counter({
      name: "gatehouse_request_headers_dropped_total",
      help: "Request headers not forwarded for a _ in their name: underscore (upstream.underscore_headers: drop), alias (kept, but it would read as a header gatehouse owns).",
      labelNames: ["reason"],
      registers: [registry],
    }),
    traceSpansDropped: new Counter({
      name: "gatehouse_trace_spans_dropped_total",
      help: "Spans not exported: the queue was full, or their export failed or timed out.",
      registers: [registry],
    }),
  };
}

/** Forwarded requests the upstream failed, by reason (upstream/failures.ts names them). */
function upstreamMetrics(registry: Registry): Pick<Metrics, "upstreamFailures"> {
  return {
    upstreamFailures: new Counter({
      name: "gatehouse_upstream_failures_total",
      help: "Forwarded requests the upstream failed (502, 504, or cut mid-answer), by reason: connect, closed, timeout, body_timeout, bad_response, tls, other.",
      labelNames: ["reason"],
      registers: [registry],
    }),
  };
}

/** The WebSocket connections' metrics (docs/websocket.md). */
function websocketMetrics(
  registry: Registry,
): Pick<Metrics, "websocketConnections" | "websocketBytes" | "websocketCloses"> {
  return {
    websocketConnections: new Gauge({
      name: "gatehouse_websocket_connections",
      help: "Open WebSocket connections, by route.",
      labelNames: ["route"],
      registers: [registry],
    }),
    websocketBytes: new Counter({
      name: "gatehouse_websocket_bytes_total",
      help: "Bytes relayed on WebSocket connections, by route and direction (in: from the client, out: to it).",
      labelNames: ["route", "direction"],
      registers: [registry],
    }),
    websocketCloses: new Counter({
      name: "gatehouse_websocket_closes_total",
      help: "Ended WebSocket connections, by route, who closed them (client, upstream, gatehouse) and why.",
      labelNames: ["route", "closed_by", "reason"],
      registers: [registry],
    }),
  };
}

/** Creates the metrics in a new registry. */
export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "gatehouse_process_" });
  const requests = new RequestMetrics(LATENCY_BUCKETS);
  requests.register(registry);
  return {
    registry,
    requests,
    configReloads: new Counter({
      name: "gatehouse_config_reloads_total",
      help: "Configuration reloads, by result (success, failure, unchanged).",
      labelNames: ["result"],
      registers: [registry],
    }),
    configHash: new Gauge({
      name: "gatehouse_config_info",
      help: "1 for the sha256 of the configuration in force.",
      labelNames: ["hash"],
      registers: [registry],
    }),
    tokensIssued: new Counter({
      name: "gatehouse_tokens_issued_total",
      help: "Access tokens issued by the token endpoint.",
      registers: [registry],
    }),
    authFailures: new Counter({
      name: "gatehouse_auth_failures_total",
      help: "Failed client authentications and refused bearer tokens, by reason.",
      labelNames: ["reason"],
      registers: [registry],
    }),
    ...clientAuthMetrics(registry),
    ...issuerMetrics(registry),
    limitRefusals: new Counter({
      name: "gatehouse_limit_refusals_total",
      help: "Requests over a limit, by refusal, plan and limit; dry_run=true ones were let through.",
      labelNames: ["refusal", "dry_run", "plan", "limit"],
      registers: [registry],
    }),
    limitNear: new Counter({
      name: "gatehouse_limit_near_total",
      help: "Allowed requests that left 20% or less of a limit, by plan and limit.",
      labelNames: ["plan", "limit"],
      registers: [registry],
    }),
    limiterStoreUp: new Gauge({
      name: STORE_UP,
      help: "1 while the Redis limiter store answers within limits.redis.timeout, else 0.",
      registers: [],
    }),
    limiterStoreErrors: new Counter({
      name: "gatehouse_limiter_store_errors_total",
      help: "Requests whose counting failed (Redis down or slow), by the on_outage that answered.",
      labelNames: ["on_outage"],
      registers: [registry],
    }),
    limiterFallbacks: new Counter({
      name: "gatehouse_limiter_fallbacks_total",
      help: "Limiter calls answered from this process's memory while Redis was unavailable.",
      registers: [registry],
    }),
    limiterRoundTrips: new Counter({
      name: "gatehouse_limiter_round_trips_total",
      help: "Network round trips to Redis made to count or read requests' limits.",
      registers: [registry],
    }),
    limiterLocalBlocks: new Counter({
      name: "gatehouse_limiter_local_blocks_total",
      help: "Refusals answered from this replica's record of Redis's refusals, without a Redis call.",
      registers: [registry],
    }),
    ...droppedMetrics(registry),
    ...upstreamMetrics(registry),
    ...websocketMetrics(registry),
  };
}
