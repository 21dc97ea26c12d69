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
import { createRequestIdStage } from "./request-id.js";
import { createRouteStage } from "./route.js";
import { createTokenEndpointStage } from "./token-endpoint.js";
import type { CounterStore } from "../limits/counters.js";
import type { Forwarder } from "../upstream/forwarder.js";
import type { Stage } from "../core/context.js";
import type { Services } from "../core/services.js";
import { createTokenMarks, type LocalMarks } from "../tokens/marks.js";

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
    outage,
  );
  // Used assertion ids and revoked tokens: in Redis with the limits when they are there.
  const marks = createTokenMarks(deps.limiterStore.shared, deps.localMarks, outage, {
    failed: (error) => services.log.debug({ err: error }, "token marks not shared"),
  });
  return Object.freeze([
    // First, so that every answer (a 400 too) carries X-Request-Id.
    createRequestIdStage(services.newId),
    // Framing checks (two Host lines) come before anything reads the request.
    createFramingStage(),
    // Who sent it, from the peer and the hops trusted proxies vouch for, once for every stage.
    createClientStage(config.trustedProxies),
    // The path is canonicalised once; every later stage and the upstream see the same string.
    createCanonicalPathStage(),
    // gatehouse's own paths: answered here, never forwarded, never counted.
    createHealthStage(config.health, services.lifecycle),
    // The token and revocation endpoints and the JWKS: gatehouse's own paths too, before the
    // allowlist.
    createTokenEndpointStage(config.tokens, failures, marks, services, deps.tokenBodyMs),
    // The allowlist: 404 and 405 never reach the limiter.
    createRouteStage(config.routes),
    // 401 and 400 for the bearer token come after 404/405 and before anything counts.
    createAuthenticateStage(config.tokens, failures, marks, services),
    // After the route (only forwarded requests) and before the limits, so a refused
    // translation parameter (400) is never counted.
    createLanguageStage(config.languages),
    // Last before forwarding: only a request that would be forwarded is counted, and everything
    // it can be refused for (401, 400) has been checked, so those answers carry no limit headers.
    createLimitsStage(config.limits, deps.limiterStore, services),
    createForwardStage(config.upstream, deps.forwarder),
  ]);
}
