/**
 * Every scenario of the benchmark, declared once: its name, what it measures (for `--help`) and
 * its kind. A side-by-side scenario gives two targets that bench/run.ts measures in paired rounds
 * against a goal for their CPU ratio; a standalone one measures by itself and returns its report.
 * The order here is the order they run in, the side-by-side ones together.
 */
import { measureBigConfig } from "./big-config.js";
import { measureFootprint } from "./footprint.js";
import { prepareFullRedis } from "./full-redis.js";
import { measureKeys } from "./keys.js";
import { prepareRedis } from "./redis.js";
import { measureToken } from "./token.js";
import { measureUpgradeChurn } from "./upgrade-churn.js";
import { markdownSection, type Section } from "./report.js";
import {
  bareUndici,
  bearer,
  express,
  forward,
  full,
  language,
  type Pairing,
  type Skip,
} from "./scenarios.js";
import type { Shared } from "./shared.js";
import { prepareTracing } from "./tracing.js";
import { prepareTrustedProxies } from "./trusted-proxies.js";
import { prepareProvider } from "./provider.js";
import { prepareDpop } from "./dpop.js";

/** Two targets measured in paired rounds; the candidate's CPU per request over the baseline's. */
export interface SideBySide {
  readonly kind: "side-by-side";
  readonly name: string;
  readonly description: string;
  /** The bound of the CPU ratio. */
  readonly goal: number;
  /** What the baseline is, for the goal's wording: `≤ 1.10× bare`. */
  readonly versus: string;
  /** Starts what the scenario needs through `shared` and gives its targets, or why it cannot run. */
  prepare(shared: Shared): Promise<Pairing | Skip>;
}

/** A measurement of its own, with its own report. */
export interface Standalone {
  readonly kind: "standalone";
  readonly name: string;
  readonly description: string;
  measure(shared: Shared): Promise<Section>;
}

export type Entry = SideBySide | Standalone;

/** Every scenario, in the order they run. */
export const SCENARIOS: readonly Entry[] = [
  {
    kind: "standalone",
    name: "footprint",
    description: "one process's ready time and RSS, idle and after 100k clients",
    measure: measureFootprint,
  },
  {
    kind: "standalone",
    name: "big-config",
    description: "start and reload on 10,000 routes, the event loop's longest hold",
    measure: measureBigConfig,
  },
  {
    kind: "side-by-side",
    name: "forward",
    description: "an auth: none route",
    goal: 1.1,
    versus: "bare",
    prepare: forward,
  },
  {
    kind: "side-by-side",
    name: "bearer",
    description: "a route that needs a Bearer token",
    goal: 1.15,
    versus: "bare",
    prepare: bearer,
  },
  {
    kind: "side-by-side",
    name: "language",
    description: "Accept-Language and translation_language, against neither",
    goal: 1.05,
    versus: "without",
    prepare: language,
  },
  {
    kind: "side-by-side",
    name: "full",
    description: "a token with the route's scope, a language, two rate limits and a quota",
    goal: 0.75,
    versus: "bare",
    prepare: full,
  },
  {
    kind: "side-by-side",
    name: "bare-undici",
    description: "the full request through a bare undici forwarder, the floor on undici",
    goal: 0.75,
    versus: "bare",
    prepare: bareUndici,
  },
  {
    kind: "side-by-side",
    name: "express",
    description:
      "the full request through Express, jose, express-rate-limit, http-proxy-middleware",
    goal: 0.25,
    versus: "Express",
    prepare: express,
  },
  {
    kind: "side-by-side",
    name: "tracing",
    description: "the full request with every span exported over OTLP/HTTP",
    goal: 1.25,
    versus: "bare",
    prepare: prepareTracing,
  },
  {
    kind: "side-by-side",
    name: "provider",
    description: "the full request with an identity provider's RS256 token; reference: own token",
    goal: 1.05,
    versus: "own token",
    prepare: prepareProvider,
  },
  {
    kind: "side-by-side",
    name: "dpop",
    description:
      "the full request with a DPoP-bound token and a fresh ES256 proof; reference: Bearer",
    goal: 1.5,
    versus: "Bearer",
    prepare: prepareDpop,
  },
  {
    kind: "side-by-side",
    name: "trusted-proxies",
    description: "X-Forwarded-For through trusted proxies, the client counted",
    goal: 1.1,
    versus: "bare",
    prepare: async (shared) => prepareTrustedProxies(await shared.context(), await shared.bares()),
  },
  {
    kind: "side-by-side",
    name: "redis",
    description: "counting in a Redis of its own; then Redis's own figures",
    goal: 1.15,
    versus: "bare",
    prepare: async (shared) => prepareRedis(await shared.context(), await shared.bares()),
  },
  {
    kind: "side-by-side",
    name: "full-redis",
    description:
      "the full request counted in a Redis of its own; references: full and redis of the same run",
    goal: 0.85,
    versus: "bare",
    prepare: prepareFullRedis,
  },
  {
    kind: "standalone",
    name: "token",
    description: "the token endpoint, a client asking again with its right secret",
    measure: measureToken,
  },
  {
    kind: "standalone",
    name: "keys",
    description: "what a tracked client costs the memory store",
    measure: async (shared) => markdownSection(await measureKeys(await shared.context())),
  },
  {
    kind: "standalone",
    name: "upgrade-churn",
    description:
      "100k requests with Upgrade: h2c on one connection: RSS, and the event loop held by its close",
    measure: measureUpgradeChurn,
  },
];
