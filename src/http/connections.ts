/**
 * The public listener's connections. Node's server parses pipelined requests as they arrive and
 * hands each to the application at once; here a connection's requests are handled one at a time,
 * in order, as nginx, HAProxy and Envoy do, and nothing read after an answer that closes the
 * connection is handled. Open connections are capped: at the cap, the connection idle the longest
 * is closed to make room, and without an idle one the new connection is closed unanswered.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { AfterPending } from "./client-errors.js";
import { serveAsPlainHttp } from "./plain-upgrade.js";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** Waiting requests from which the connection is no longer read until they are answered. */
const PAUSE_AT = 4;
/** The most requests a connection may have waiting; the last one's answer closes it. */
export const MAX_WAITING = 32;

/** One open client connection. */
interface Connection {
  readonly socket: Socket;
  /** The response being produced; undefined between requests. */
  current: ServerResponse | undefined;
  /** The request `current` answers. */
  request: IncomingMessage | undefined;
  readonly waiting: Array<readonly [IncomingMessage, ServerResponse]>;
  /** False once the connection is known to close: requests read afterwards are dropped. */
  accepting: boolean;
  /** Whether reading was paused here, because requests were waiting. */
  paused: boolean;
  /** What ends the connection once the answers owed are written (after a parser error). */
  then: (() => void) | undefined;
}

const CONNECTION = Symbol("gatehouse.connection");
type TaggedResponse = ServerResponse & { [CONNECTION]?: Connection };

/** The listeners that put a server's connections in order. */
export interface ManagedConnections {
  /** The listener for `request` and `checkContinue`. */
  readonly onRequest: Handler;
  /** For the `clientError` listener: ends the connection after the answers it owes. */
  readonly afterPending: AfterPending;
}

/** The open connections, and those of them with no request in progress. */
interface Registry {
  readonly open: Map<Socket, Connection>;
  /** The longest idle first (a Set keeps insertion order). */
  readonly idle: Set<Connection>;
}

// Drops a connection that is closed or handed back: nothing more is handled on it.
function forget(registry: Registry, connection: Connection): void {
  registry.open.delete(connection.socket);
  registry.idle.delete(connection);
  connection.accepting = false;
  connection.waiting.length = 0;
}

// Registers a new connection; at the cap, the oldest idle one makes room, or the new one is closed.
function admit(registry: Registry, socket: Socket, maxConnections: number): void {
  if (registry.open.size >= maxConnections) {
    // Like nginx's reusable connections: one that waits for a request loses nothing but its
    // place, and a client reconnects (RFC 9112 §9.3.1 lets either side close an idle one).
    const oldest = registry.idle.values().next().value;
    if (oldest === undefined) {
      socket.destroy();
      return;
    }
    forget(registry, oldest);
    oldest.socket.destroy();
  }
  const connection: Connection = {
    socket,
    current: undefined,
    request: undefined,
    waiting: [],
    accepting: true,
    paused: false,
    then: undefined,
  };
  registry.open.set(socket, connection);
  registry.idle.add(connection);
  socket.once("close", () => forget(registry, connection));
}

// Puts a request behind the one being answered.
function wait(connection: Connection, req: IncomingMessage, res: ServerResponse): void {
  const { waiting, socket } = connection;
  waiting.push([req, res]);
  if (waiting.length === MAX_WAITING) {
    // A client this far ahead of its answers is cut off after the last one it is owed.
    res.setHeader("connection", "close");
    connection.accepting = false;
  }
  // Node's parser goes on reading requests while earlier ones wait; past a few, the socket is
  // no longer read, so a client cannot make gatehouse hold an unbounded number of them.
  if (waiting.length >= PAUSE_AT && !connection.paused) {
    connection.paused = true;
    socket.pause();
  }
}

// After a parser error behind a complete request: `close` ends the connection once the answers
// owed are written.
function closeAfterAnswers(connection: Connection, close: () => void): void {
  // An error inside a waiting request's body is that request's answer: it is not handled.
  const { waiting } = connection;
  while (waiting.length > 0 && waiting[waiting.length - 1]?.[0].complete !== true) waiting.pop();
  // The parser has stopped at the error: what it reads from now on is never a request.
  connection.accepting = false;
  connection.then ??= close;
  connection.socket.pause();
}

/**
 * Takes over `server`'s connections: `handle` runs for one request of a connection at a time.
 * `maxConnections` is read at every accepted connection, so a reload changes it.
 */
export function manageConnections(
  server: Server,
  handle: Handler,
  maxConnections: () => number,
  upgrade: (req: IncomingMessage, socket: Socket, rest: Buffer) => boolean,
): ManagedConnections {
  const registry: Registry = { open: new Map(), idle: new Set() };
  const { open, idle } = registry;

  server.on("connection", (socket: Socket) => admit(registry, socket, maxConnections()));

  function start(connection: Connection, req: IncomingMessage, res: ServerResponse): void {
    connection.current = res;
    connection.request = req;
    idle.delete(connection);
    (res as TaggedResponse)[CONNECTION] = connection;
    res.once("finish", onFinish);
    handle(req, res);
  }

  // Node's own `finish` listener runs first: after an answer that closes, it has ended the
  // socket, so what was read behind that answer is dropped rather than handled.
  function onFinish(this: ServerResponse): void {
    const connection = (this as TaggedResponse)[CONNECTION] as Connection;
    const { socket } = connection;
    if (socket.destroyed || socket.writableEnded) {
      forget(registry, connection);
      socket.pause();
      return;
    }
    const next = connection.waiting.shift();
    if (next === undefined) {
      connection.current = undefined;
      connection.request = undefined;
      if (connection.then === undefined) idle.add(connection);
      else connection.then();
    } else {
      start(connection, next[0], next[1]);
    }
    if (connection.paused && connection.accepting && connection.waiting.length < PAUSE_AT) {
      connection.paused = false;
      socket.resume();
    }
  }

  // Node hands over a connection at a request carrying Upgrade; once the answers owed before
  // that request are written, a WebSocket handshake on a WebSocket route keeps it, and any other
  // is given back to be served as plain HTTP. Read behind an answer that closes (the connection
  // is then forgotten or no longer accepting), it is dropped like any other request.
  server.on("upgrade", (req: IncomingMessage, socket: Socket, rest: Buffer) => {
    const connection = open.get(socket);
    if (connection === undefined || !connection.accepting) return;
    const takeBack = (): void => {
      if (!socket.destroyed && upgrade(req, socket, rest)) {
        // A WebSocket keeps its place among the open connections until it closes, as nginx
        // counts an upgraded connection in `worker_connections`; it is never idle, so never
        // closed to make room.
        connection.accepting = false;
        idle.delete(connection);
        return;
      }
      forget(registry, connection);
      if (!socket.destroyed) serveAsPlainHttp(server, req, socket, rest);
    };
    if (connection.current === undefined) takeBack();
    else connection.then = takeBack;
  });

  const afterPending: AfterPending = (socket, close) => {
    const connection = open.get(socket as Socket);
    // An error inside the request being answered is its answer, given at once.
    if (connection?.request?.complete !== true) return false;
    closeAfterAnswers(connection, close);
    return true;
  };

  const onRequest: Handler = (req, res) => {
    const connection = open.get(req.socket);
    if (connection === undefined || !connection.accepting) return;
    if (connection.current === undefined) start(connection, req, res);
    else wait(connection, req, res);
  };
  return { onRequest, afterPending };
}
