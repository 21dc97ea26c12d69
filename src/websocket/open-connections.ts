/**
 * The WebSocket connections open in this process, across reloads: each is closed with 1008 when
 * its token expires, and within two seconds of the token's revocation or of a reload that stops
 * accepting its client (RFC 6455 §7.4.1: policy violation), and all of them with 1001 when the
 * process shuts down.
 */
import type { Clock, Timer } from "../clock.js";
import type { Relay } from "./relay.js";

/** How often open connections' tokens are checked against the revoked ones and the clients. */
export const REVOCATION_CHECK_MS = 1_000;

/** One open connection, and what ends it. */
export interface OpenConnection {
  readonly relay: Relay;
  /** When its token stops being accepted (epoch ms); Infinity for an anonymous route. */
  readonly untilMs: number;
  /** Whether its token is revoked now; undefined where revocation is not gatehouse's to know. */
  readonly revoked: ((nowMs: number) => boolean | Promise<boolean | "unavailable">) | undefined;
  /** Its token's issuer (`own` or a `trusted_issuers` name); undefined for an anonymous route. */
  readonly issuer: string | undefined;
  /** Its token's client; undefined for an anonymous route. */
  readonly clientId: string | undefined;
}

/** Whether the config in force accepts the tokens of `issuer`'s client `clientId`. */
export type AcceptsClient = (issuer: string, clientId: string) => boolean;

/** The open connections. */
export interface OpenConnections {
  /** Keeps `connection` until `remove`; its token's end closes it. */
  add(connection: OpenConnection): void;
  remove(connection: OpenConnection): void;
  /**
   * From the next check on, closes with 1008 the connections whose client `accepts` refuses: a
   * reload removed the client, or changed it so that its tokens are no longer accepted.
   */
  acceptOnly(accepts: AcceptsClient): void;
  /** Closes every open connection with 1001 (RFC 6455 §7.4.1: going away). */
  closeAll(words: string): void;
  readonly size: number;
}

/** The registry of a process; `now` reads epoch ms, `clock` sets the timers. */
export function createOpenConnections(now: () => number, clock: Clock): OpenConnections {
  const open = new Map<OpenConnection, Timer | undefined>();
  let sweep: Timer | undefined;
  // Every client is accepted until a reload says otherwise: the handshake was authenticated.
  let accepts: AcceptsClient = () => true;

  // Checked on every sweep, not only at the reload: a handshake authenticated by the config
  // before may get its 101 after the reload.
  const clientGone = ({ issuer, clientId }: OpenConnection): boolean =>
    issuer !== undefined && clientId !== undefined && !accepts(issuer, clientId);

  const check = (): void => {
    const nowMs = now();
    for (const connection of open.keys()) {
      if (clientGone(connection)) {
        connection.relay.close(1008, "client_removed", "the client is no longer accepted");
        continue;
      }
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
      sweep ??= clock.every(REVOCATION_CHECK_MS, check);
    },
    remove(connection) {
      open.get(connection)?.cancel();
      open.delete(connection);
      if (open.size === 0) {
        sweep?.cancel();
        sweep = undefined;
      }
    },
    acceptOnly(next) {
      accepts = next;
    },
    closeAll(words) {
      for (const connection of open.keys()) connection.relay.close(1001, "shutdown", words);
    },
    get size() {
      return open.size;
    },
  };
}
