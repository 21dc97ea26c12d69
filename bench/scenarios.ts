/**
 * The side-by-side scenarios' common ground: what a scenario is (two targets and a goal for their
 * CPU ratio), the shared gatehouse processes' config, and the scenarios measured on those
 * processes: what each sends, to which two targets.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { dpopHeaders, type BoundKey } from "./dpop-proof.js";
import type { Served } from "./processes.js";
import type { Section } from "./report.js";
import type { Shared } from "./shared.js";

/** A request stream, sent in round `i` to `served[i % served.length]`. */
export interface Target {
  readonly label: string;
  readonly served: readonly Served[];
  /** Path and query. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Set when every request carries a DPoP-bound token and a proof made for it alone. */
  readonly bound?: BoundRequests;
}

/** The keys a target's requests sign their DPoP proofs with, and the tokens bound to them. */
export interface BoundRequests {
  readonly keys: readonly BoundKey[];
  /** The same, as JSON (`{ "keys": [...] }`), for the load generator (dpop-load.ts). */
  readonly keysFile: string;
}

/** The process that serves `target` in round `round`. */
export function servedIn(target: Target, round: number): Served {
  return target.served[round % target.served.length] as Served;
}

/** How many rounds it takes for every process to have served each of the scenario's targets. */
export function turns(scenario: Scenario): number {
  return Math.max(scenario.baseline.served.length, scenario.candidate.served.length);
}

/** Two targets measured side by side; the goal bounds candidate CPU/request ÷ baseline's. */
export interface Scenario {
  readonly name: string;
  readonly goal: number;
  readonly goalText: string;
  readonly baseline: Target;
  readonly candidate: Target;
}

/** A side-by-side scenario's two targets, their processes running. */
export interface Pairing {
  readonly baseline: Target;
  readonly candidate: Target;
  /** A measurement of its own, run after every scenario's paired rounds. */
  readonly after?: () => Promise<Section>;
}

/** Why a scenario cannot run on this machine. */
export interface Skip {
  readonly reason: string;
}

/** A scenario that cannot run on this machine, and why. */
export interface Skipped extends Skip {
  readonly name: string;
}

const OPEN_PATH = "/v1/status";
const PROTECTED_PATH = "/v1/items";
/** The full scenario's route: protected, and it needs a scope the limited client is granted. */
const SCOPED_PATH = "/v1/orders";
/** The scope the full request's route needs. */
export const SCOPE = "orders:read";
/** The shared gatehouse processes' token endpoint. */
export const TOKEN_PATH = "/oauth/token";
const LANGUAGE_QUERY = "translation_language=FR,de";
const LANGUAGE_HEADERS = { "accept-language": "fr-CA,fr;q=0.9,en;q=0.5" };
/** The client without a plan; its secret is `Secrets.bearer`. */
export const BEARER_CLIENT = "bench-bearer";
/** The client whose plan counts the full request; its secret is `Secrets.limited`. */
export const LIMITED_CLIENT = "bench-limited";
// High enough that no run is ever refused: the full scenario measures counting, not refusing.
const NEVER_REACHED = 1_000_000_000_000;

/** The client secrets, handed to gatehouse through the environment (`secret_env`). */
export interface Secrets {
  readonly env: Readonly<Record<string, string>>;
  readonly bearer: string;
  readonly limited: string;
}

/** New random client secrets for one run. */
export function newSecrets(): Secrets {
  const bearer = randomBytes(24).toString("base64url");
  const limited = randomBytes(24).toString("base64url");
  return {
    env: { GATEHOUSE_BENCH_BEARER_SECRET: bearer, GATEHOUSE_BENCH_LIMITED_SECRET: limited },
    bearer,
    limited,
  };
}

/** A new EdDSA signing key (PKCS#8 PEM), shared by the gatehouse processes of one run. */
export function newSigningKey(): string {
  return generateKeyPairSync("ed25519").privateKey.export({
    type: "pkcs8",
    format: "pem",
  }) as string;
}

/** How a scenario's own gatehouse processes differ from the shared ones. */
export interface Variant {
  /** Lines added to the `tokens:` block. */
  readonly tokens?: string;
  /** Entries added to the `clients:` list. */
  readonly clients?: string;
  /** The `limits:` block's lines, in place of the memory store. */
  readonly limits?: string;
  /** Top-level keys added at the end. */
  readonly more?: string;
}

/**
 * The shared gatehouse processes' config: the example's route table, one open route without an
 * anonymous plan, a client without a plan (unlimited) and one whose plan has two rate limits (a
 * burst and a sustained one) and a quota on the memory store, granted the scope that the full
 * scenario's route needs. Tokens are signed with the key in
 * `keyFile`, so every process of a run accepts the tokens of the others. Logging stays at its
 * default level, `info`. `variant` changes it for a scenario's own processes.
 */
export function benchConfig(
  upstreamUrl: string,
  port: number,
  keyFile: string,
  variant: Variant = {},
): string {
  return `listen: 127.0.0.1:${port}
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstreamUrl}
tokens:
  path: ${TOKEN_PATH}
  signing:
    algorithm: EdDSA
    key_file: ${JSON.stringify(keyFile)}
  scopes: [${SCOPE}]
${variant.tokens ?? ""}clients:
  - id: ${BEARER_CLIENT}
    secret_env: GATEHOUSE_BENCH_BEARER_SECRET
  - id: ${LIMITED_CLIENT}
    secret_env: GATEHOUSE_BENCH_LIMITED_SECRET
    plan: bench
    scopes: [${SCOPE}]
${variant.clients ?? ""}plans:
  bench:
    rate_limits:
      burst: { limit: ${NEVER_REACHED}, window: 1s }
      sustained: { limit: ${NEVER_REACHED}, window: 1h }
    quota: { limit: ${NEVER_REACHED}, period: day }
routes:
  - path: ${PROTECTED_PATH}
    methods: [GET]
  - path: /v1/items/*
    methods: [GET, PUT, DELETE]
    cost: 2
  - path: ${SCOPED_PATH}
    methods: [GET]
    scopes: [${SCOPE}]
  - path: /v1/reports/**
    methods: [GET, POST]
  - path: ${OPEN_PATH}
    methods: [GET]
    auth: none
limits:
${variant.limits ?? "  store: memory\n"}${variant.more ?? ""}`;
}

/** Throws, with what was answered, unless every process of `target` answers its request with 200. */
export async function assertAnswered(target: Target): Promise<void> {
  for (const served of target.served) {
    const url = served.url + target.path;
    const proof = target.bound === undefined ? {} : dpopHeaders(target.bound.keys, url)();
    const response = await fetch(url, { headers: { ...target.headers, ...proof } });
    const body = await response.text();
    if (response.status !== 200) {
      throw new Error(
        `${served.name}: GET ${target.path} answered ${response.status} ${body.slice(0, 120)}`.trim(),
      );
    }
  }
}

/** The fields of a token response (RFC 6749 §5.1) the bench reads. */
export interface TokenResponse {
  readonly access_token: string;
  readonly token_type?: unknown;
}

// RFC 6749 §4.4 client-credentials grant, the client authenticated with HTTP Basic (§2.3.1).
/** The token response for `id`, obtained from `gatehouse` with HTTP Basic and `headers`. */
export async function tokenResponse(
  gatehouse: Served,
  id: string,
  secret: string,
  headers: Readonly<Record<string, string>> = {},
): Promise<TokenResponse> {
  const basic = Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`);
  const response = await fetch(gatehouse.url + TOKEN_PATH, {
    method: "POST",
    headers: { ...headers, authorization: `Basic ${basic.toString("base64")}` },
    body: new URLSearchParams({ grant_type: "client_credentials" }),
  });
  const text = await response.text();
  const body = response.status === 200 ? (JSON.parse(text) as Partial<TokenResponse>) : {};
  if (typeof body.access_token !== "string") {
    throw new Error(`POST ${TOKEN_PATH} answered ${response.status} ${text.slice(0, 120)}`);
  }
  return body as TokenResponse;
}

/** A token for `id`, obtained from `gatehouse` with HTTP Basic. */
export async function fetchToken(gatehouse: Served, id: string, secret: string): Promise<string> {
  return (await tokenResponse(gatehouse, id, secret)).access_token;
}

function authorization(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/**
 * Sends `path` with `headers` to the run's bare forwarders and to its two gatehouse processes:
 * each gatehouse process is paired with its own bare one, the two pairs taking turns.
 */
async function againstBare(
  shared: Shared,
  path: string,
  headers: Readonly<Record<string, string>>,
): Promise<Pairing> {
  return {
    baseline: { label: "bare http-proxy-3", served: await shared.bares(), path, headers },
    candidate: { label: "gatehouse", served: await shared.gatehouses(), path, headers },
  };
}

/** `forward`: the open route, through gatehouse and through the bare forwarder. */
export function forward(shared: Shared): Promise<Pairing> {
  return againstBare(shared, OPEN_PATH, {});
}

/** `bearer`: the protected route with a token of the client without a plan. */
export async function bearer(shared: Shared): Promise<Pairing> {
  const [gatehouse] = await shared.gatehouses();
  const token = await fetchToken(gatehouse, BEARER_CLIENT, shared.secrets.bearer);
  return againstBare(shared, PROTECTED_PATH, authorization(token));
}

/**
 * `language`: the open route with and without a language to normalise. Both kinds go to
 * gatehouse, each kind to its own process, the two processes swapping kinds from round to round.
 */
export async function language(shared: Shared): Promise<Pairing> {
  const [gatehouse, twin] = await shared.gatehouses();
  return {
    baseline: {
      label: "gatehouse, no language",
      served: [twin, gatehouse],
      path: OPEN_PATH,
      headers: {},
    },
    candidate: {
      label: "gatehouse, fr-CA + FR,de",
      served: [gatehouse, twin],
      path: `${OPEN_PATH}?${LANGUAGE_QUERY}`,
      headers: LANGUAGE_HEADERS,
    },
  };
}

/** The full request's path and its headers but the token. */
export const FULL_PATH = `${SCOPED_PATH}?${LANGUAGE_QUERY}`;
/** The full request's headers but the token. */
export const FULL_HEADERS: Readonly<Record<string, string>> = LANGUAGE_HEADERS;

/**
 * The `full` request: a protected route that needs a scope, with a language and a token, from
 * `gatehouse`, of the client whose plan counts it and who is granted the scope.
 */
export async function fullRequest(
  gatehouse: Served,
  secrets: Secrets,
): Promise<{ path: string; headers: Record<string, string> }> {
  const token = await fetchToken(gatehouse, LIMITED_CLIENT, secrets.limited);
  return { path: FULL_PATH, headers: { ...FULL_HEADERS, ...authorization(token) } };
}

/** `full`: the full request, through gatehouse and through the bare forwarder. */
export async function full(shared: Shared): Promise<Pairing> {
  const { path, headers } = await sharedFullRequest(shared);
  return againstBare(shared, path, headers);
}

/** The full request, its token from the run's shared gatehouse processes. */
async function sharedFullRequest(
  shared: Shared,
): Promise<{ path: string; headers: Record<string, string> }> {
  const [gatehouse] = await shared.gatehouses();
  return fullRequest(gatehouse, shared.secrets);
}

/**
 * `bare-undici`: the full request through the bare http-proxy-3 forwarder and through its peer on
 * undici's dispatcher: the floor a forwarder on undici reaches on the same machine.
 */
export async function bareUndici(shared: Shared): Promise<Pairing> {
  const { path, headers } = await sharedFullRequest(shared);
  return {
    baseline: { label: "bare http-proxy-3", served: await shared.bares(), path, headers },
    candidate: { label: "bare undici", served: await shared.bareUndicis(), path, headers },
  };
}

/**
 * `express`: the full request through gatehouse and through an Express stack doing the same work
 * (token, scope, language, two rate limits, forwarding).
 */
export async function express(shared: Shared): Promise<Pairing> {
  const { path, headers } = await sharedFullRequest(shared);
  return {
    baseline: { label: "Express stack", served: await shared.expressStacks(), path, headers },
    candidate: { label: "gatehouse", served: await shared.gatehouses(), path, headers },
  };
}
