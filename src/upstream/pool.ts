/**
 * The connections to one upstream: at most `max_sockets` of them, kept open between exchanges and
 * reused last-freed first (the warmest), closed after `idle_timeout` unused. An exchange that
 * finds every connection busy waits its turn, first come first served.
 */
import { connect as connectTcp, isIP, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import { UpstreamConnection, type ConnectionOwner } from "./connection.js";
import type { UpstreamSettings } from "./settings.js";

/** An exchange waiting for a connection. */
export interface Waiting {
  /** Called once, with the connection the exchange is to use. */
  start(connection: UpstreamConnection): void;
}

/** The connections of one upstream. */
export interface Pool {
  /** Starts `waiting` on a free connection, a new one, or the first to be freed. */
  acquire(waiting: Waiting): void;
  /** Takes `waiting` out of the queue: it no longer wants a connection. */
  cancel(waiting: Waiting): void;
  /** Starts `waiting` on a new connection of its own, closed after it. */
  fresh(waiting: Waiting): void;
  /** Stops reusing connections: idle ones close now, busy ones when their exchange ends. */
  retire(): void;
}

/** Opens a connection to `url`'s host, TLS for https. */
function opener(url: URL): () => Socket {
  const secure = url.protocol === "https:";
  // URL keeps an IPv6 literal's brackets; the socket wants the address alone.
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  const port = Number(url.port === "" ? (secure ? 443 : 80) : url.port);
  if (!secure) return () => connectTcp({ host, port });
  // RFC 6066 §3: SNI names a host, never an address.
  const servername = isIP(host) === 0 ? host : undefined;
  return () => connectTls({ host, port, servername, ALPNProtocols: ["http/1.1"] });
}

/** A connection's owner that never keeps it: for the exchanges sent on one of their own. */
const SINGLE_USE: ConnectionOwner = {
  released: (connection) => connection.abandon(),
  closed: () => undefined,
};

/** Creates the pool of `upstream`; it opens connections only when exchanges need them. */
export function createPool(upstream: UpstreamSettings): Pool {
  const open = opener(upstream.url);
  const max = upstream.maxSockets;
  const idle: UpstreamConnection[] = [];
  const queue: Waiting[] = [];
  let count = 0;
  let retired = false;

  const owner: ConnectionOwner = {
    released(connection, reusable) {
      if (!reusable || retired) {
        connection.abandon();
        return;
      }
      const next = queue.shift();
      if (next !== undefined) next.start(connection);
      else idle.push(connection);
    },
    closed(connection) {
      count -= 1;
      const at = idle.indexOf(connection);
      if (at >= 0) idle.splice(at, 1);
      const next = queue.shift();
      if (next !== undefined) startNew(next);
    },
  };

  function startNew(waiting: Waiting): void {
    count += 1;
    waiting.start(new UpstreamConnection(open(), owner));
  }

  // Closes connections idle for `idle_timeout`, before the upstream closes them itself (a Node
  // server does after 5 s) under a request. A connection that carried no exchange between two
  // sweeps half the idle time apart has been idle for at least half of it and at most all of it.
  const sweep = setInterval(
    () => {
      // Closing is asynchronous: `closed` takes a connection out of `idle` after the loop.
      for (const connection of idle) {
        if (connection.sweepMark === connection.uses) connection.abandon();
        else connection.sweepMark = connection.uses;
      }
    },
    Math.max(1, Math.floor(upstream.idleTimeoutMs / 2)),
  );
  // The sweep never holds the process open.
  sweep.unref();

  return {
    acquire(waiting) {
      const connection = idle.pop();
      if (connection !== undefined) waiting.start(connection);
      else if (count < max) startNew(waiting);
      else queue.push(waiting);
    },
    cancel(waiting) {
      const at = queue.indexOf(waiting);
      if (at >= 0) queue.splice(at, 1);
    },
    fresh(waiting) {
      waiting.start(new UpstreamConnection(open(), SINGLE_USE));
    },
    retire() {
      retired = true;
      clearInterval(sweep);
      for (const connection of idle.splice(0)) connection.abandon();
    },
  };
}
