/**
 * The keys of each trusted issuer, kept for the life of the process (a reload that keeps an
 * issuer keeps its keys): fetched at start without holding readiness, again every 10 minutes,
 * and at once for a token naming an unknown `kid`, at most once per 30 s. While fetches fail they
 * are retried with backoff up to 30 s and the last good keys stay in use.
 *
 * jose's createRemoteJWKSet is not used: it has its own cool-down and cache, and keeps no last
 * good set through an outage, cannot tell "the provider is down" (503) from "no such key" (401),
 * has no size cap, no discovery and no metrics. Keys fetched here feed createLocalJWKSet, which
 * picks a key by `kid`, `alg` and key type exactly as jose's remote set would.
 */
import { createLocalJWKSet, type JSONWebKeySet, type JWK } from "jose";
import type { Services } from "../core/services.js";
import type { Timer } from "../clock.js";
import { fetchKeys, KeysFetchFailed, type KeysLocation } from "./issuer-fetch.js";

/** Background refresh while the provider answers. */
export const REFRESH_MS = 10 * 60_000;
/** Refetches for an unknown `kid` are at least this far apart, per issuer. */
export const UNKNOWN_KID_COOLDOWN_MS = 30_000;
/** The longest wait between retries while fetches fail. */
export const MAX_BACKOFF_MS = 30_000;
const FIRST_BACKOFF_MS = 1000;

/** Where one issuer's keys are, and which algorithms they are for. */
export interface IssuerSource extends KeysLocation {
  /** The issuer's `name`: the metrics label and the log's. */
  readonly name: string;
  readonly algorithms: readonly string[];
}

/** What jose verifies a token with: a key chosen from the set by the token's header. */
export type KeyChooser = ReturnType<typeof createLocalJWKSet>;

/** The keys of one issuer as last fetched. */
export interface IssuerKeySet {
  /** Chooses the key for a token's header; undefined before any fetch succeeded. */
  readonly chooser: KeyChooser | undefined;
  /** Whether a key with this `kid` was in the last good JWKS. */
  hasKid(kid: string): boolean;
  /** Whether the last fetch succeeded: an unknown `kid` is then really not the provider's. */
  readonly fresh: boolean;
  /** Whole seconds until the next fetch, at least 1 (the 503's Retry-After). */
  retryAfterSeconds(): number;
  /** For an unknown `kid`: fetches now unless the cool-down forbids; resolves when done. */
  refresh(): Promise<void>;
}

/** The process's issuer key sets. */
export interface IssuerKeys {
  /** The set for `source`, started on first use. */
  setFor(source: IssuerSource): IssuerKeySet;
  /** Stops the sets that no source in `inUse` names (the config no longer trusts them). */
  retain(inUse: readonly IssuerSource[]): void;
  /** Stops every set's timers. */
  close(): void;
}

// The kinds of key each algorithm verifies with (RFC 7518 §3.1, RFC 8037 §3.1).
function keyTypeFits(jwk: JWK, algorithms: readonly string[]): boolean {
  return algorithms.some((alg) => {
    if (jwk.alg !== undefined && jwk.alg !== alg) return false;
    if (alg.startsWith("RS") || alg.startsWith("PS")) return jwk.kty === "RSA";
    if (alg === "EdDSA") return jwk.kty === "OKP";
    const curve = { ES256: "P-256", ES384: "P-384", ES512: "P-521" }[alg];
    return jwk.kty === "EC" && jwk.crv === curve;
  });
}

/**
 * The members gatehouse may verify with: never one carrying a private part (`d`, or a
 * symmetric `k`), one meant for encryption, or one none of the issuer's algorithms can use.
 */
export function usableKeys(jwks: JSONWebKeySet, algorithms: readonly string[]): JSONWebKeySet {
  return {
    keys: jwks.keys.filter(
      (jwk) =>
        jwk.d === undefined &&
        jwk.k === undefined &&
        (jwk.use === undefined || jwk.use === "sig") &&
        keyTypeFits(jwk, algorithms),
    ),
  };
}

function identityOf(source: IssuerSource): string {
  return JSON.stringify([source.name, source.issuer, source.jwksUri, source.algorithms]);
}

interface RunningSet extends IssuerKeySet {
  stop(): void;
}

// The state of one issuer's keys and the timer of its next fetch.
function startSet(source: IssuerSource, services: Services): RunningSet {
  const { clock, log, metrics } = services;
  let chooser: KeyChooser | undefined;
  let kids = new Set<string>();
  let [fresh, outage, failures] = [false, false, 0];
  let inFlight: Promise<void> | undefined;
  let timer: Timer | undefined;
  let nextAt = clock.monotonic();
  let lastKidFetch = -Infinity;
  let stopped = false;

  const schedule = (ms: number): void => {
    timer?.cancel();
    nextAt = clock.monotonic() + ms;
    timer = clock.after(ms, () => void fetchNow());
  };

  // A set the config no longer names takes nothing in and schedules nothing more.
  const succeeded = (jwks: JSONWebKeySet): void => {
    if (stopped) return;
    const usable = usableKeys(jwks, source.algorithms);
    chooser = createLocalJWKSet(usable);
    kids = new Set(usable.keys.flatMap((jwk) => (jwk.kid === undefined ? [] : [jwk.kid])));
    metrics.issuerKeyFetches.inc({ issuer: source.name, result: "ok" });
    if (outage) log.info({ issuer: source.name }, "issuer keys fetched again");
    fresh = true;
    outage = false;
    failures = 0;
    schedule(REFRESH_MS);
  };

  const failed = (error: unknown): void => {
    if (stopped) return;
    const result = error instanceof KeysFetchFailed ? error.result : "network";
    metrics.issuerKeyFetches.inc({ issuer: source.name, result });
    // Once per outage: a provider that stays down for an hour writes one line, not 120.
    if (!outage) {
      log.warn(
        { issuer: source.name, result, err: error, keptKeys: kids.size },
        "issuer keys cannot be fetched; the last good keys stay in use",
      );
    }
    fresh = false;
    outage = true;
    failures++;
    schedule(Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (failures - 1)));
  };

  function fetchNow(): Promise<void> {
    if (inFlight !== undefined) return inFlight;
    timer?.cancel();
    const settled = fetchKeys(source, clock)
      .then(succeeded, failed)
      .finally(() => {
        inFlight = undefined;
      });
    inFlight = settled;
    return settled;
  }

  void fetchNow();
  return {
    get chooser() {
      return chooser;
    },
    get fresh() {
      return fresh;
    },
    hasKid: (kid) => kids.has(kid),
    retryAfterSeconds: () => Math.max(1, Math.ceil((nextAt - clock.monotonic()) / 1000)),
    refresh() {
      if (inFlight !== undefined) return inFlight;
      const nowMs = clock.monotonic();
      if (nowMs - lastKidFetch < UNKNOWN_KID_COOLDOWN_MS) return Promise.resolve();
      lastKidFetch = nowMs;
      return fetchNow();
    },
    stop() {
      stopped = true;
      timer?.cancel();
    },
  };
}

/** Creates the process's issuer key sets. */
export function createIssuerKeys(services: Services): IssuerKeys {
  const sets = new Map<string, RunningSet>();
  return {
    setFor(source) {
      const id = identityOf(source);
      let set = sets.get(id);
      if (set === undefined) {
        set = startSet(source, services);
        sets.set(id, set);
      }
      return set;
    },
    retain(inUse) {
      const kept = new Set(inUse.map(identityOf));
      for (const [id, set] of sets) {
        if (kept.has(id)) continue;
        set.stop();
        sets.delete(id);
      }
    },
    close() {
      for (const set of sets.values()) set.stop();
      sets.clear();
    },
  };
}
