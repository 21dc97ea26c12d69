/**
 * What the token endpoint and bearer enforcement remember about `jti`s: assertion ids already used
 * (RFC 7523 §3 item 7: accepted once until their `exp`) and revoked access tokens (RFC 7009 §2:
 * denied until their `exp`). With the memory store both live in this process; with Redis every
 * replica shares them, and under an outage `on_outage` decides as for the limits: `closed`
 * answers 503; `local` records and checks in the process (and keeps refusing what the last copy
 * from Redis revoked); `open` records in the process too but does not read Redis's revoked ids,
 * so only what this process revoked itself is refused.
 *
 * Revoked ids are read from Redis by each replica as a whole, at most once a second and only when
 * a bearer token is checked after the copy it holds is a second old: one round trip a second per
 * replica instead of one per request, and a revocation reaches every replica within a second.
 */
import type { Clock } from "../clock.js";
import type { SharedMarks } from "../limits/counters.js";
import type { Outage } from "../limits/outage.js";
import type { MarksState, SavedMark } from "../limits/state-file.js";
import { createEndingSet } from "./ending-set.js";

/** A Redis copy of the revoked ids is used for at most this long. */
export const REVOKED_COPY_MS = 1000;

/**
 * Assertion ids held per client, at most: a client that sends more assertions than this within
 * their lifetime (each until its own exp, at most `tokens.assertion_max_lifetime` ahead) is
 * refused new ones until its old ones end. Refusing, rather than forgetting an id still in force,
 * is what keeps a replay refused; only an assertion that verified is held, so only a client's own
 * keys can fill its share.
 */
export const MAX_ASSERTIONS_PER_CLIENT = 10_000;

/**
 * Revoked ids held per client, at most: a client that revokes more of its tokens than this within
 * their lifetime is refused new revocations (503) until some end. Every replica reads all revoked
 * ids each second, so no client may grow that read without bound by minting and revoking.
 */
export const MAX_REVOCATIONS_PER_CLIENT = 10_000;

/** Ids held per client until each one's end, at most `most` of them per client. */
export interface HeldPerClient {
  readonly most: number;
  has(clientId: string, id: string, nowMs: number): boolean;
  /**
   * Holds `id` for `clientId` until `untilMs`; false, holding nothing, when the client already
   * holds its most of other ids.
   */
  add(clientId: string, id: string, untilMs: number, nowMs: number): boolean;
  /** Every id held at `nowMs`, with its client and end, for the state file. */
  save(nowMs: number): SavedMark[];
  close(): void;
}

// One id of one client, as the set holds it: the client id's length first, so that a client id
// holding spaces (a provider's client may) is read back whole.
function heldKey(clientId: string, id: string): string {
  return `${clientId.length} ${clientId}${id}`;
}

function fromHeldKey(key: string): { readonly client: string; readonly id: string } {
  const space = key.indexOf(" ");
  const end = space + 1 + Number(key.slice(0, space));
  return { client: key.slice(space + 1, end), id: key.slice(end) };
}

function createHeldPerClient(
  now: () => number,
  clock: Clock,
  most: number,
  added: () => void,
): HeldPerClient {
  const perClient = new Map<string, number>();
  const ids = createEndingSet(now, clock, (key) => {
    const { client } = fromHeldKey(key);
    const held = (perClient.get(client) ?? 1) - 1;
    if (held === 0) perClient.delete(client);
    else perClient.set(client, held);
  });
  return {
    most,
    has: (clientId, id, nowMs) => ids.has(heldKey(clientId, id), nowMs),
    add(clientId, id, untilMs, nowMs) {
      const key = heldKey(clientId, id);
      const full = () => !ids.has(key, nowMs) && (perClient.get(clientId) ?? 0) >= most;
      if (full()) {
        // Ended ids count until they are swept: a full share is swept before it refuses.
        ids.sweep(nowMs);
        if (full()) return false;
      }
      if (ids.add(key, untilMs, nowMs)) perClient.set(clientId, (perClient.get(clientId) ?? 0) + 1);
      added();
      return true;
    },
    save(nowMs) {
      return ids.live(nowMs).map(({ id: key, endsAt }) => ({ ...fromHeldKey(key), endsAt }));
    },
    close: () => ids.close(),
  };
}

/**
 * DPoP proof ids held per client, at most: a client that sends more proofs than this within
 * their window (`tokens.dpop.iat_window`: 100,000 in 300 s is 333 a second), with however many
 * keys, is refused new ones until its old ones end. Only a proof that passed every other check
 * is held, so only a client holding a valid token, or an authenticated one, can fill its share.
 */
export const MAX_PROOFS_PER_CLIENT = 100_000;

/** The process's own record, outliving reloads: used ids and revoked ids. */
export interface LocalMarks extends MarksState {
  /** Used assertion ids, per client. */
  readonly used: HeldPerClient;
  /**
   * Used DPoP proof ids (`<thumbprint> <jti>`), per client. They are written to the state file
   * with every save, but a new one does not make a save of its own: a bearer route adds one per
   * request, and a save writes every mark.
   */
  readonly proofs: HeldPerClient;
  /** Revoked access-token ids, per client (a token's client is its `sub`). */
  readonly revoked: HeldPerClient;
  close(): void;
}

/**
 * Creates the process's empty record, swept on `clock` at the time `now` reads, holding at most
 * `most` ids per client of each kind (the Redis store holds the same).
 */
export function createLocalMarks(
  now: () => number,
  clock: Clock,
  most = {
    assertions: MAX_ASSERTIONS_PER_CLIENT,
    revocations: MAX_REVOCATIONS_PER_CLIENT,
    proofs: MAX_PROOFS_PER_CLIENT,
  },
): LocalMarks {
  let listener = (): void => undefined;
  const added = (): void => listener();
  const used = createHeldPerClient(now, clock, most.assertions, added);
  const revoked = createHeldPerClient(now, clock, most.revocations, added);
  const proofs = createHeldPerClient(now, clock, most.proofs, () => undefined);
  const restore = (held: HeldPerClient, saved: readonly SavedMark[], nowMs: number): void => {
    for (const { client, id, endsAt } of saved) {
      if (endsAt > nowMs) held.add(client, id, endsAt, nowMs);
    }
  };
  return {
    used,
    revoked,
    proofs,
    save: (nowMs) => ({
      used: used.save(nowMs),
      revoked: revoked.save(nowMs),
      proofs: proofs.save(nowMs),
    }),
    restore(saved, nowMs) {
      restore(used, saved.used, nowMs);
      restore(revoked, saved.revoked, nowMs);
      restore(proofs, saved.proofs, nowMs);
    },
    watch(onAdded) {
      listener = onAdded;
    },
    close() {
      used.close();
      revoked.close();
      proofs.close();
    },
  };
}

/** What a first use of an assertion id found. */
export type FirstUse = "first" | "replayed" | "full" | "unavailable";

/** What a revocation did: "full" when the client holds its most revoked ids already. */
export type Revocation = "revoked" | "full" | "unavailable";

/** The jti records of one snapshot, over the store it counts in. */
export interface TokenMarks {
  /** Records the first use of `jti` by `clientId` until `untilMs`. */
  firstUse(clientId: string, jti: string, untilMs: number, nowMs: number): Promise<FirstUse>;
  /**
   * Records the first use of a DPoP proof's `jti` by the key of thumbprint `jkt`, sent by
   * `clientId`, until `untilMs`.
   */
  firstProof(
    clientId: string,
    jkt: string,
    jti: string,
    untilMs: number,
    nowMs: number,
  ): Promise<FirstUse>;
  /** Revokes `jti`, a token of `clientId`, until `untilMs`; "unavailable" under a Redis outage with `closed`. */
  revoke(clientId: string, jti: string, untilMs: number, nowMs: number): Promise<Revocation>;
  /** Whether `jti`, a token of `clientId`, is revoked; "unavailable" under a Redis outage with `closed`. */
  isRevoked(
    clientId: string,
    jti: string,
    nowMs: number,
  ): boolean | Promise<boolean | "unavailable">;
}

/** What `TokenMarks` reports to. */
export interface MarksReport {
  /** A call to Redis failed: the outage decides. */
  failed(error: unknown): void;
}

// The process's record of a first use, refused when the holder's share is full.
function localFirstUse(
  held: HeldPerClient,
  holder: string,
  jti: string,
  untilMs: number,
  nowMs: number,
): FirstUse {
  if (held.has(holder, jti, nowMs)) return "replayed";
  return held.add(holder, jti, untilMs, nowMs) ? "first" : "full";
}

// The process's record of a revocation, refused when the client's share is full.
function localRevoke(
  local: LocalMarks,
  clientId: string,
  jti: string,
  untilMs: number,
  nowMs: number,
): "revoked" | "full" {
  return local.revoked.add(clientId, jti, untilMs, nowMs) ? "revoked" : "full";
}

/**
 * The records over `shared` (Redis; undefined with the memory store) and `local`, following
 * `outage` when Redis fails.
 */
export function createTokenMarks(
  shared: SharedMarks | undefined,
  local: LocalMarks,
  outage: Outage,
  report: MarksReport,
): TokenMarks {
  if (shared === undefined) {
    return {
      firstUse: async (clientId, jti, untilMs, nowMs) =>
        localFirstUse(local.used, clientId, jti, untilMs, nowMs),
      firstProof: async (clientId, jkt, jti, untilMs, nowMs) =>
        localFirstUse(local.proofs, clientId, `${jkt} ${jti}`, untilMs, nowMs),
      revoke: async (clientId, jti, untilMs, nowMs) =>
        localRevoke(local, clientId, jti, untilMs, nowMs),
      isRevoked: (clientId, jti, nowMs) => local.revoked.has(clientId, jti, nowMs),
    };
  }
  return sharedTokenMarks(shared, local, outage, report);
}

// The records in Redis, for every replica, with the process's own standing in under an outage.
function sharedTokenMarks(
  shared: SharedMarks,
  local: LocalMarks,
  outage: Outage,
  report: MarksReport,
): TokenMarks {
  // The latest copy of Redis's revoked ids, and when it was asked for (epoch ms).
  let copy = new Map<string, number>();
  let askedAt = Number.NEGATIVE_INFINITY;
  let refreshing: Promise<boolean> | undefined;
  const refresh = (nowMs: number): Promise<boolean> =>
    (refreshing ??= shared.revoked(nowMs).then(
      (ids) => {
        copy = new Map(ids);
        askedAt = nowMs;
        refreshing = undefined;
        return true;
      },
      (error: unknown) => {
        refreshing = undefined;
        report.failed(error);
        return false;
      },
    ));
  const inCopy = (jti: string, nowMs: number): boolean => (copy.get(jti) ?? 0) > nowMs;
  // Under `local` and `open` the process records what Redis could not; under `closed`, nothing.
  const orLocal = <T>(error: unknown, local: () => T): T | "unavailable" => {
    report.failed(error);
    return outage.passes() ? local() : "unavailable";
  };

  // Marked once in Redis, for every replica; under an outage, as `on_outage` says.
  const sharedFirstUse = (
    subject: string,
    id: string,
    untilMs: number,
    nowMs: number,
    orInProcess: () => FirstUse,
  ): Promise<FirstUse> =>
    shared.markOnce(subject, id, untilMs, nowMs).then(
      (first) => (first ? "first" : "replayed"),
      (error: unknown) => orLocal(error, orInProcess),
    );

  return {
    firstUse: (clientId, jti, untilMs, nowMs) =>
      sharedFirstUse(`client:${clientId}`, jti, untilMs, nowMs, () =>
        localFirstUse(local.used, clientId, jti, untilMs, nowMs),
      ),
    // Under a subject of its own kind: a client's all begin with "client:". Redis holds each id
    // until it ends, outside this process's memory; the process's record, bounded per client,
    // stands in under an outage.
    firstProof: (clientId, jkt, jti, untilMs, nowMs) =>
      sharedFirstUse(`dpop:${jkt}`, jti, untilMs, nowMs, () =>
        localFirstUse(local.proofs, clientId, `${jkt} ${jti}`, untilMs, nowMs),
      ),
    revoke(clientId, jti, untilMs, nowMs) {
      const subject = `client:${clientId}`;
      return shared.revoke(subject, jti, untilMs, nowMs, local.revoked.most).then(
        (added) => {
          if (!added) return "full" as const;
          // This replica denies it at once; the others within a second.
          copy.set(jti, untilMs);
          return "revoked" as const;
        },
        (error: unknown) => orLocal(error, () => localRevoke(local, clientId, jti, untilMs, nowMs)),
      );
    },
    isRevoked(clientId, jti, nowMs) {
      if (local.revoked.has(clientId, jti, nowMs)) return true;
      const age = nowMs - askedAt;
      if (age >= 0 && age < REVOKED_COPY_MS) return inCopy(jti, nowMs);
      return refresh(nowMs).then((fresh) => {
        if (fresh) return inCopy(jti, nowMs);
        if (!outage.passes()) return "unavailable";
        // `local`: the process's own record (checked above), and the last copy, which only ever
        // adds refusals; `open`: not checked.
        return outage.policy === "local" && inCopy(jti, nowMs);
      });
    },
  };
}
