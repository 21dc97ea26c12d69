/**
 * The request path, top to bottom: this list is what gatehouse does to a request. Each stage
 * either adds facts to the context and lets the next one run, or answers.
 */
import type { Snapshot } from "../config/snapshot.js";
import { createFailureLimiter } from "../limits/failures.js";
import { createOutage } from "../limits/outage.js";
import { createAuthenticateStage } from "./authenticate.js";
import { createCanonicalPathStage } from "./canonical-path.js";
import { createClientStage } from "./client.js";
import { createForwardStage } from "./forward.js";
import { createFramingStage } from "./framing.js";
import { createHealthStage } from "./health.js";
import { createLanguageStage } from "./language.js";
import { createLimitsStage } from "./limits.js";
import { createMetadataStage } from "./metadata.js";
import { createOriginsStage } from "./origins.js";
import { createRequestIdStage } from "./request-id.js";
import { createRouteStage } from "./route.js";
import { createScopesStage } from "./scopes.js";
import { createTokenEndpointStage } from "./token-endpoint.js";
import { createTraceContextStage } from "./trace-context.js";
import type { CounterStore } from "../limits/counters.js";
import type { Forwarder } from "../upstream/forwarder.js";
import type { Stage } from "../core/context.js";
import type { Services } from "../core/services.js";
import { createTokenMarks, type LocalMarks, type TokenMarks } from "../tokens/marks.js";
import { createTokenVerifier, type KeySetFor } from "../tokens/verify.js";
import type { TokenCaches } from "../tokens/caches.js";
import type { UntrustedForwarded } from "../http/untrusted-forwarded.js";
import { challengesOf, metadataOf } from "../tokens/metadata.js";
import { OWN_ISSUER_NAME } from "../config/issuers-schema.js";
import type { OpenConnections } from "../websocket/open-connections.js";
import type { RelayDeps } from "../websocket/upgrade.js";

/** What the stages are built with besides the snapshot. */
export interface PipelineDeps {
  readonly services: Services;
  readonly forwarder: Forwarder;
  /** Counters live here, across reloads. */
  readonly limiterStore: CounterStore;
  /** Milliseconds a token request's body may take to arrive once it is wanted (408 after). */
  readonly tokenBodyMs: number;
  /** The process's used assertion ids and revoked token ids, across reloads. */
  readonly localMarks: LocalMarks;
  /** Each trusted issuer's keys, fetched and kept across reloads. */
  readonly keySetFor: KeySetFor;
  /** The open WebSocket connections, across reloads. */
  readonly websockets: OpenConnections;
  /** The verified tokens and remembered secrets, across reloads that keep what they stand on. */
  readonly caches: TokenCaches;
  /** Forwarding headers from untrusted peers: counted, and each peer warned about once a process. */
  readonly untrustedForwarded: UntrustedForwarded;
}

/** Builds the ordered stages for one config snapshot. */
export function buildStages(config: Snapshot, deps: PipelineDeps): readonly Stage[] {
  const { services } = deps;
  // One count per IP for both ways of failing to authenticate: client secrets and bearer tokens.
  const outage = createOutage(config.limits.store, services.metrics);
  const failures = createFailureLimiter(
    deps.limiterStore,
    config.tokens.failureLimit,
    services.now,
    services.clock,
    outage,
  );
  // Used assertion ids and revoked tokens: in Redis with the limits when they are there.
  const marks = createTokenMarks(deps.limiterStore.shared, deps.localMarks, outage, {
    failed: (error) => services.log.debug({ err: error }, "token marks not shared"),
  });
  // The metadata documents, and the challenge of a bearer route that points to the resource's.
  const metadata = metadataOf(config.tokens, config.routes.routes);
  const challenges = challengesOf(metadata, config.tokens.dpop.algorithms);
  return Object.freeze([
    // First, so that every answer (a 400 too) carries X-Request-Id.
    createRequestIdStage(services.newId),
    // Second, for the same reason: every answer's log line (and span) carries the trace ids.
    createTraceContextStage(config.tracing.sampleRatio, services.traceIds),
    // Framing checks (two Host lines) come before anything reads the request.
    createFramingStage(),
    // Who sent it, from the peer and the hops trusted proxies vouch for, once for every stage.
    createClientStage(config.trustedProxies, deps.untrustedForwarded),
    // The path is canonicalised once; every later stage and the upstream see the same string.
    createCanonicalPathStage(),
    // gatehouse's own paths: answered here, never forwarded, never counted.
    createHealthStage(config.health, services.lifecycle),
    // The token and revocation endpoints: gatehouse's own paths too, before the allowlist.
    createTokenEndpointStage(
      config.tokens,
      deps.caches.remembered,
      failures,
      marks,
      services,
      deps.tokenBodyMs,
    ),
    // The JWKS and the RFC 8414 and RFC 9728 metadata: public, uncounted, before the allowlist.
    createMetadataStage(config.tokens, metadata),
    // The allowlist: 404 and 405 never reach the limiter.
    createRouteStage(config.routes),
    // A route's origins: a page of another site is refused before its token is even read.
    createOriginsStage(),
    // 401 and 400 for the bearer token (a revoked one too) come after 404/405 and before anything
    // counts.
    createAuthenticateStage(
      config.tokens,
      createTokenVerifier(config.tokens, deps.keySetFor, deps.caches.verified),
      failures,
      marks,
      services,
      challenges,
    ),
    // 403 for a token without the route's scopes: known only once the token is, and before
    // anything counts, so a refused request is neither counted nor forwarded.
    createScopesStage(config.routes, challenges, services.metrics.authFailures),
    // After the route (only forwarded requests) and before the limits, so a refused
    // translation parameter (400) is never counted.
    createLanguageStage(config.languages),
    // Last before forwarding: only a request that would be forwarded is counted, and everything
    // it can be refused for (401, 400) has been checked, so those answers carry no limit headers.
    createLimitsStage(config.limits, deps.limiterStore, services),
    createForwardStage(
      config.upstream,
      deps.forwarder,
      services.metrics.requestHeadersDropped,
      relayDeps(config, deps, marks),
    ),
  ]);
}

// What a WebSocket connection's relay needs: its idle bound, the open connections, and whether
// its token, one of gatehouse's own, has been revoked since (a provider's is the provider's).
function relayDeps(config: Snapshot, deps: PipelineDeps, marks: TokenMarks): RelayDeps {
  return {
    services: deps.services,
    idleMs: config.upstream.websocketIdleMs,
    open: deps.websockets,
    revoked({ token, clientId, issuer }) {
      if (token === undefined || issuer !== OWN_ISSUER_NAME) return undefined;
      return (nowMs) => marks.isRevoked(clientId as string, token.jti, nowMs);
    },
  };
}
