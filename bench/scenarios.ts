/**
 * The scenarios: what each sends, to which two targets, and the goal for their CPU ratio. A
 * scenario whose feature has not landed in this build is skipped with the reason, found by
 * probing the running gatehouse rather than by reading its source.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import type { Served } from "./processes.js";

/** A request stream, sent in round `i` to `served[i % served.length]`. */
export interface Target {
  readonly label: string;
  readonly served: readonly Served[];
  /** Path and query. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
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

/** A scenario that cannot run against this build, and why. */
export interface Skipped {
  readonly name: string;
  readonly reason: string;
}

/** Every scenario, in the order they run. */
export const SCENARIO_NAMES = ["forward", "bearer", "language", "full", "keys", "redis"] as const;

const OPEN_PATH = "/v1/status";
const PROTECTED_PATH = "/v1/items";
const TOKEN_PATH = "/oauth/token";
const LANGUAGE_QUERY = "translation_language=FR,de";
const LANGUAGE_HEADERS = { "accept-language": "fr-CA,fr;q=0.9,en;q=0.5" };
const BEARER_CLIENT = "bench-bearer";
const LIMITED_CLIENT = "bench-limited";
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

/**
 * gatehouse's config for every scenario: the example's route table, one open route without an
 * anonymous plan, a client without a plan (unlimited) and one whose plan has two rate limits (a
 * burst and a sustained one) and a quota on the memory store. Tokens are signed with the key in `keyFile`, so every process of a
 * run accepts the tokens of the others. Logging stays at its default level, `info`.
 */
export function benchConfig(upstreamUrl: string, port: number, keyFile: string): string {
  return `listen: 127.0.0.1:${port}
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstreamUrl}
tokens:
  path: ${TOKEN_PATH}
  signing:
    algorithm: EdDSA
    key_file: ${JSON.stringify(keyFile)}
clients:
  - id: ${BEARER_CLIENT}
    secret_env: GATEHOUSE_BENCH_BEARER_SECRET
  - id: ${LIMITED_CLIENT}
    secret_env: GATEHOUSE_BENCH_LIMITED_SECRET
    plan: bench
plans:
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
  - path: /v1/reports/**
    methods: [GET, POST]
  - path: ${OPEN_PATH}
    methods: [GET]
    auth: none
limits:
  store: memory
`;
}

interface Probe {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

async function probe(
  served: Served,
  path: string,
  headers: Readonly<Record<string, string>> = {},
): Promise<Probe> {
  const response = await fetch(served.url + path, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

function describe(path: string, answer: Probe): string {
  return `GET ${path} answered ${answer.status} ${answer.body.slice(0, 120)}`.trim();
}

// RFC 6749 §4.4 client-credentials grant, client authenticated with HTTP Basic (§2.3.1), the
// method every token endpoint must support; client_secret_post is tried when Basic is refused.
async function fetchToken(gatehouse: Served, id: string, secret: string): Promise<string> {
  const basic = Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`);
  const attempts: Array<[Record<string, string>, URLSearchParams]> = [
    [
      { authorization: `Basic ${basic.toString("base64")}` },
      new URLSearchParams({ grant_type: "client_credentials" }),
    ],
    [
      {},
      new URLSearchParams({
        grant_type: "client_credentials",
        client_id: id,
        client_secret: secret,
      }),
    ],
  ];
  let last = "";
  for (const [headers, body] of attempts) {
    const response = await fetch(gatehouse.url + TOKEN_PATH, { method: "POST", headers, body });
    const text = await response.text();
    if (response.status === 200) {
      const token = (JSON.parse(text) as { access_token?: unknown }).access_token;
      if (typeof token === "string") return token;
    }
    last = `POST ${TOKEN_PATH} answered ${response.status} ${text.slice(0, 120)}`;
  }
  throw new Error(last);
}

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** The facts the scenarios depend on, found by probing the running gatehouse once. */
interface Features {
  readonly forward: string | undefined;
  readonly bearerToken: string | Error;
  readonly limitedToken: string | Error;
  readonly enforcesBearer: string | undefined;
  readonly language: string | undefined;
}

async function probeFeatures(gatehouse: Served, secrets: Secrets): Promise<Features> {
  const open = await probe(gatehouse, OPEN_PATH);
  const unauthenticated = await probe(gatehouse, PROTECTED_PATH);
  const language = await probe(gatehouse, `${OPEN_PATH}?${LANGUAGE_QUERY}`, LANGUAGE_HEADERS);
  const vary = (language.headers.get("vary") ?? "").toLowerCase();
  const token = (id: string, secret: string) =>
    fetchToken(gatehouse, id, secret).catch((error: unknown) => error as Error);
  return {
    forward: open.status === 200 ? undefined : describe(OPEN_PATH, open),
    bearerToken: await token(BEARER_CLIENT, secrets.bearer),
    limitedToken: await token(LIMITED_CLIENT, secrets.limited),
    enforcesBearer:
      unauthenticated.status === 401
        ? undefined
        : `bearer authentication is not in this build: without a token, ${describe(PROTECTED_PATH, unauthenticated)}`,
    language:
      language.status === 200 && vary.includes("accept-language")
        ? undefined
        : `language normalisation is not in this build: ${describe(`${OPEN_PATH}?${LANGUAGE_QUERY}`, language)} without Vary: Accept-Language`,
  };
}

// Every process a scenario sends to must answer its requests with 200.
async function firstRefusal(scenario: Scenario): Promise<string | undefined> {
  for (const target of [scenario.baseline, scenario.candidate]) {
    for (const served of target.served) {
      const answer = await probe(served, target.path, target.headers);
      if (answer.status !== 200) return `${served.name}: ${describe(target.path, answer)}`;
    }
  }
  return undefined;
}

/**
 * Probes gatehouse and builds the wanted scenarios that this build supports; the others come
 * back as skipped, each with the reason. `twin` is a second gatehouse with the same config, and
 * `bare` two bare forwarders: a scenario comparing gatehouse with the bare forwarder pairs each
 * gatehouse process with its own bare one in turn, and a scenario comparing two kinds of request
 * to gatehouse sends each kind to its own process, the two processes swapping kinds from round
 * to round.
 */
export async function prepareScenarios(
  wanted: readonly string[],
  bare: readonly [Served, Served],
  gatehouse: Served,
  twin: Served,
  secrets: Secrets,
): Promise<{ ready: Scenario[]; skipped: Skipped[] }> {
  const gatehouses = [gatehouse, twin];
  const features = await probeFeatures(gatehouse, secrets);
  const ready: Scenario[] = [];
  const skipped: Skipped[] = [];
  const tokenProblem = (token: string | Error) =>
    token instanceof Error ? `no token from the token endpoint: ${token.message}` : undefined;

  for (const name of wanted) {
    let reason: string | undefined;
    let scenario: Scenario | undefined;
    if (name === "forward") {
      reason = features.forward;
      scenario = {
        name,
        goal: 1.1,
        goalText: "≤ 1.10× bare",
        baseline: { label: "bare http-proxy-3", served: bare, path: OPEN_PATH, headers: {} },
        candidate: { label: "gatehouse", served: gatehouses, path: OPEN_PATH, headers: {} },
      };
    } else if (name === "bearer") {
      reason = tokenProblem(features.bearerToken) ?? features.enforcesBearer;
      const headers = typeof features.bearerToken === "string" ? bearer(features.bearerToken) : {};
      scenario = {
        name,
        goal: 1.15,
        goalText: "≤ 1.15× bare",
        baseline: { label: "bare http-proxy-3", served: bare, path: PROTECTED_PATH, headers },
        candidate: { label: "gatehouse", served: gatehouses, path: PROTECTED_PATH, headers },
      };
    } else if (name === "language") {
      reason = features.language;
      scenario = {
        name,
        goal: 1.05,
        goalText: "≤ 1.05× without",
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
    } else {
      reason = tokenProblem(features.limitedToken) ?? features.enforcesBearer ?? features.language;
      const path = `${PROTECTED_PATH}?${LANGUAGE_QUERY}`;
      const headers = {
        ...LANGUAGE_HEADERS,
        ...(typeof features.limitedToken === "string" ? bearer(features.limitedToken) : {}),
      };
      if (reason === undefined) {
        const answer = await probe(gatehouse, path, headers);
        if (answer.headers.get("x-ratelimit-limit") === null) {
          reason = `limits are not in this build: ${describe(path, answer)} without X-RateLimit-Limit`;
        } else if (answer.headers.get("x-request-quota-limit") === null) {
          reason = `quotas are not in this build: ${describe(path, answer)} without X-Request-Quota-Limit`;
        }
      }
      scenario = {
        name,
        goal: 1.1,
        goalText: "≤ 1.10× bare",
        baseline: { label: "bare http-proxy-3", served: bare, path, headers },
        candidate: { label: "gatehouse", served: gatehouses, path, headers },
      };
    }
    reason ??= await firstRefusal(scenario);
    if (reason === undefined) ready.push(scenario);
    else skipped.push({ name, reason });
  }
  return { ready, skipped };
}
