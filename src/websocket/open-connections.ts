/**
 * The WebSocket connections open in this process, across reloads: each is closed with 1008 when
 * its token expires or within two seconds of the token's revocation (RFC 6455 §7.4.1: policy
 * violation), and all of them with 1001 when the process shuts down.
 */
import type { Clock, Timer } from "../clock.js";
import type { Relay } from "./relay.js";

/** How often open connections' tokens are checked against the revoked ones. */
export const REVOCATION_CHECK_MS = 1_000;

/** One open connection, and what ends it. */
export interface OpenConnection {
  readonly relay: Relay;
  /** When its token stops being accepted (epoch ms); Infinity for an anonymous route. */
  readonly untilMs: number;
  /** Whether its token is revoked now; undefined where revocation is not gatehouse's to know. */
  readonly revoked: ((nowMs: number) => boolean | Promise<boolean | "unavailable">) | undefined;
}

/** The open connections. */
export interface OpenConnections {
  /** Keeps `connection` until `remove`; its token's end closes it. */
  add(connection: OpenConnection): void;
  remove(connection: OpenConnection): void;
  /** Closes every open connection with 1001 (RFC 6455 §7.4.1: going away). */
  closeAll(words: string): void;
  readonly size: number;
}

/** The registry of a process; `now` reads epoch ms, `clock` sets the timers. */
export function createOpenConnections(now: () => number, clock: Clock): OpenConnections {
  const open = new Map<OpenConnection, Timer | undefined>();
  let sweep: Timer | undefined;

  const checkRevocations = (): void => {
    const nowMs = now();
    for (const connection of open.keys()) {
      const revoked = connection.revoked?.(nowMs);
      const close = (answer: boolean | "unavailable"): void => {
        if (answer === true) connection.relay.close(1008, "revoked", "the token was revoked");
      };
      if (revoked instanceof Promise) void revoked.then(close, () => undefined);
      else if (revoked !== undefined) close(revoked);
    }
  };

  return {
    add(connection) {
      const left = connection.untilMs - now();
      const expiry = Number.isFinite(left)
        ? clock.after(Math.max(0, left), () =>
            connection.relay.close(1008, "token_expired", "the token expired"),
          )
        : undefined;
      open.set(connection, expiry);
      sweep ??= clock.every(REVOCATION_CHECK_MS, checkRevocations);
    },
    remove(connection) {
      open.get(connection)?.cancel();
      open.delete(connection);
      if (open.size === 0) {
        sweep?.cancel();
        sweep = undefined;
      }
    },
    closeAll(words) {
      for (const connection of open.keys()) connection.relay.close(1001, "shutdown", words);
    },
    get size() {
      return open.size;
    },
  };
}
