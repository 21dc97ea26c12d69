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
import { createEndingSet, type EndingSet } from "./ending-set.js";

/** A Redis copy of the revoked ids is used for at most this long. */
export const REVOKED_COPY_MS = 1000;

/**
 * Assertion ids held per client, at most: a client that sends more assertions than this within
 * their lifetime (five minutes) is refused new ones until its old ones end. Refusing, rather than
 * forgetting an id still in force, is what keeps a replay refused; only an assertion that
 * verified is held, so only a client's own keys can fill its share.
 */
export const MAX_ASSERTIONS_PER_CLIENT = 10_000;

/** The process's own record, outliving reloads: used ids and revoked ids. */
export interface LocalMarks {
  readonly used: EndingSet;
  /** Held assertion ids per client. */
  readonly usedPerClient: Map<string, number>;
  readonly revoked: EndingSet;
  close(): void;
}

/** Creates the process's empty record, swept on `clock` at the time `now` reads. */
export function createLocalMarks(now: () => number, clock: Clock): LocalMarks {
  const usedPerClient = new Map<string, number>();
  const used = createEndingSet(now, clock, (id) => {
    const client = id.slice(0, id.indexOf(" "));
    const held = (usedPerClient.get(client) ?? 1) - 1;
    if (held === 0) usedPerClient.delete(client);
    else usedPerClient.set(client, held);
  });
  const revoked = createEndingSet(now, clock);
  return {
    used,
    usedPerClient,
    revoked,
    close() {
      used.close();
      revoked.close();
    },
  };
}

/** What a first use of an assertion id found. */
export type FirstUse = "first" | "replayed" | "full" | "unavailable";

/** The jti records of one snapshot, over the store it counts in. */
export interface TokenMarks {
  /** Records the first use of `jti` by `clientId` until `untilMs`. */
  firstUse(clientId: string, jti: string, untilMs: number, nowMs: number): Promise<FirstUse>;
  /** Revokes `jti` until `untilMs`; "unavailable" under a Redis outage with `closed`. */
  revoke(jti: string, untilMs: number, nowMs: number): Promise<"revoked" | "unavailable">;
  /** Whether `jti` is revoked; "unavailable" under a Redis outage with `closed`. */
  isRevoked(jti: string, nowMs: number): boolean | Promise<boolean | "unavailable">;
}

/** What `TokenMarks` reports to. */
export interface MarksReport {
  /** A call to Redis failed: the outage decides. */
  failed(error: unknown): void;
}

// The process's record of a first use, refused when the client's share is full.
function localFirstUse(
  local: LocalMarks,
  clientId: string,
  jti: string,
  untilMs: number,
  nowMs: number,
): FirstUse {
  const key = `${clientId} ${jti}`;
  if (local.used.has(key, nowMs)) return "replayed";
  const held = local.usedPerClient.get(clientId) ?? 0;
  if (held >= MAX_ASSERTIONS_PER_CLIENT) return "full";
  local.used.add(key, untilMs, nowMs);
  local.usedPerClient.set(clientId, (local.usedPerClient.get(clientId) ?? 0) + 1);
  return "first";
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
        localFirstUse(local, clientId, jti, untilMs, nowMs),
      async revoke(jti, untilMs, nowMs) {
        local.revoked.add(jti, untilMs, nowMs);
        return "revoked";
      },
      isRevoked: (jti, nowMs) => local.revoked.has(jti, nowMs),
    };
  }
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

  return {
    firstUse(clientId, jti, untilMs, nowMs) {
      return shared.markOnce(`client:${clientId}`, jti, untilMs, nowMs).then(
        (first) => (first ? "first" : "replayed"),
        (error: unknown) =>
          orLocal(error, () => localFirstUse(local, clientId, jti, untilMs, nowMs)),
      );
    },
    revoke(jti, untilMs, nowMs) {
      return shared.revoke(jti, untilMs, nowMs).then(
        () => {
          // This replica denies it at once; the others within a second.
          copy.set(jti, untilMs);
          return "revoked" as const;
        },
        (error: unknown) =>
          orLocal(error, () => {
            local.revoked.add(jti, untilMs, nowMs);
            return "revoked" as const;
          }),
      );
    },
    isRevoked(jti, nowMs) {
      if (local.revoked.has(jti, nowMs)) return true;
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
