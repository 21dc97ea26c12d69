/**
 * The keys of each trusted issuer, kept for the life of the process (a reload that keeps an
 * issuer keeps its keys): fetched at start without holding readiness, again every 10 minutes,
 * and at once for a token naming an unknown `kid`, at most once per 30 s; a `kid` asked for while
 * that cool-down runs is fetched for when it ends. While fetches fail they are retried with
 * backoff up to 30 s and the last good keys stay in use.
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
/** The most unknown `kid`s waiting for a refetch, and remembered as not the issuer's, per issuer. */
export const MAX_UNKNOWN_KIDS = 1000;
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

/**
 * What the keys say of a `kid` they did not hold: `known` (a fetch for it brought it), `unknown`
 * (a good fetch made after it was first asked for does not have it: it is not the issuer's), or
 * why no such fetch has answered yet and in how many seconds one will: `cooldown` (the refetch
 * waits for the cool-down's end) or `unavailable` (the issuer's keys cannot be fetched).
 */
export type KidAnswer =
  | "known"
  | "unknown"
  | { readonly waiting: "cooldown" | "unavailable"; readonly retryAfterSeconds: number };

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
  /**
   * For a `kid` the keys do not hold: fetches now unless the cool-down forbids, else has the
   * fetch made when it ends; resolves with what the keys then say of it.
   */
  lookup(kid: string): Promise<KidAnswer>;
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

// Adds `kid` to `kids`, forgetting the oldest beyond MAX_UNKNOWN_KIDS: a flood of made-up kids
// costs bounded memory.
function remember(kids: Set<string>, kid: string): void {
  if (kids.has(kid)) return;
  if (kids.size >= MAX_UNKNOWN_KIDS) kids.delete(kids.values().next().value as string);
  kids.add(kid);
}

/** The unknown kids of one issuer: those waiting for a fetch, and those a good fetch lacked. */
class UnknownKids {
  private waiting = new Set<string>();
  private readonly lacking = new Set<string>();

  wait(kid: string): void {
    remember(this.waiting, kid);
  }

  anyWaiting(): boolean {
    return this.waiting.size > 0;
  }

  lacks(kid: string): boolean {
    return this.lacking.has(kid);
  }

  /** The kids a fetch starting now is asked for; those asked for later wait for the next. */
  take(): ReadonlySet<string> {
    const asked = this.waiting;
    this.waiting = new Set();
    return asked;
  }

  /** A good fetch: a kid it was asked for and lacks is not the issuer's, until one brings it. */
  fetched(asked: ReadonlySet<string>, kids: ReadonlySet<string>): void {
    for (const kid of this.lacking) if (kids.has(kid)) this.lacking.delete(kid);
    for (const kid of asked) if (!kids.has(kid)) remember(this.lacking, kid);
  }

  /** A failed fetch: its kids wait for the next. */
  failed(asked: ReadonlySet<string>): void {
    for (const kid of asked) remember(this.waiting, kid);
  }
}

/** The state of one issuer's keys and the timer of its next fetch. */
class RunningSet implements IssuerKeySet {
  chooser: KeyChooser | undefined;
  fresh = false;
  private kids: ReadonlySet<string> = new Set();
  private outage = false;
  private failures = 0;
  private inFlight: Promise<void> | undefined;
  private timer: Timer | undefined;
  private nextAt: number;
  private lastKidFetch = -Infinity;
  private stopped = false;
  private readonly unknown = new UnknownKids();

  constructor(
    private readonly source: IssuerSource,
    private readonly services: Services,
  ) {
    this.nextAt = services.clock.monotonic();
    void this.fetchNow();
  }

  hasKid(kid: string): boolean {
    return this.kids.has(kid);
  }

  retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.nextAt - this.services.clock.monotonic()) / 1000));
  }

  async lookup(kid: string): Promise<KidAnswer> {
    if (this.kids.has(kid)) return "known";
    const lacking = this.unknown.lacks(kid);
    const now =
      this.inFlight === undefined &&
      this.services.clock.monotonic() - this.lastKidFetch >= UNKNOWN_KID_COOLDOWN_MS;
    // A kid a good fetch lacked waits for nothing: it is asked for again only by a fetch that may
    // be made at once (the provider may publish it since).
    if (now || !lacking) this.unknown.wait(kid);
    if (now) await this.fetchNow();
    else if (!lacking && this.inFlight !== undefined) await this.inFlight;
    return this.answer(kid);
  }

  /** Stops the timers: a set the config no longer names takes nothing in and schedules nothing. */
  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
  }

  // What the keys say of `kid` once the fetches it could wait for have answered.
  private answer(kid: string): KidAnswer {
    if (this.kids.has(kid)) return "known";
    if (!this.fresh) return { waiting: "unavailable", retryAfterSeconds: this.retryAfterSeconds() };
    if (this.unknown.lacks(kid)) return "unknown";
    this.fetchAfterCooldown();
    return { waiting: "cooldown", retryAfterSeconds: this.retryAfterSeconds() };
  }

  private schedule(ms: number): void {
    this.timer?.cancel();
    this.nextAt = this.services.clock.monotonic() + ms;
    this.timer = this.services.clock.after(ms, () => void this.fetchNow());
  }

  // The fetch for the waiting kids when the cool-down ends, unless one is due sooner.
  private fetchAfterCooldown(): void {
    if (this.stopped) return;
    const due = this.lastKidFetch + UNKNOWN_KID_COOLDOWN_MS;
    if (this.nextAt > due) this.schedule(due - this.services.clock.monotonic());
  }

  private fetchNow(): Promise<void> {
    if (this.inFlight !== undefined) return this.inFlight;
    this.timer?.cancel();
    const { clock } = this.services;
    // A fetch that answers for unknown kids counts against the cool-down, whatever started it.
    const asked = this.unknown.take();
    if (asked.size > 0) this.lastKidFetch = clock.monotonic();
    const settled = fetchKeys(this.source, clock)
      .then(
        (jwks) => this.succeeded(jwks, asked),
        (error: unknown) => this.failed(error, asked),
      )
      .finally(() => {
        this.inFlight = undefined;
      });
    this.inFlight = settled;
    return settled;
  }

  private succeeded(jwks: JSONWebKeySet, asked: ReadonlySet<string>): void {
    if (this.stopped) return;
    const { source } = this;
    const usable = usableKeys(jwks, source.algorithms);
    this.chooser = createLocalJWKSet(usable);
    this.kids = new Set(usable.keys.flatMap((jwk) => (jwk.kid === undefined ? [] : [jwk.kid])));
    this.unknown.fetched(asked, this.kids);
    this.services.metrics.issuerKeyFetches.inc({ issuer: source.name, result: "ok" });
    if (this.outage) this.services.log.info({ issuer: source.name }, "issuer keys fetched again");
    this.fresh = true;
    this.outage = false;
    this.failures = 0;
    this.schedule(REFRESH_MS);
    // Kids asked for while this fetch was under way wait for the next.
    if (this.unknown.anyWaiting()) this.fetchAfterCooldown();
  }

  private failed(error: unknown, asked: ReadonlySet<string>): void {
    if (this.stopped) return;
    this.unknown.failed(asked);
    const result = error instanceof KeysFetchFailed ? error.result : "network";
    this.services.metrics.issuerKeyFetches.inc({ issuer: this.source.name, result });
    // Once per outage: a provider that stays down for an hour writes one line, not 120.
    if (!this.outage) {
      this.services.log.warn(
        { issuer: this.source.name, result, err: error, keptKeys: this.kids.size },
        "issuer keys cannot be fetched; the last good keys stay in use",
      );
    }
    this.fresh = false;
    this.outage = true;
    this.failures++;
    this.schedule(Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (this.failures - 1)));
  }
}

/** Creates the process's issuer key sets. */
export function createIssuerKeys(services: Services): IssuerKeys {
  const sets = new Map<string, RunningSet>();
  return {
    setFor(source) {
      const id = identityOf(source);
      let set = sets.get(id);
      if (set === undefined) {
        set = new RunningSet(source, services);
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
