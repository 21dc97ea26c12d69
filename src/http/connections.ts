/**
 * The public listener's connections. Node's server parses pipelined requests as they arrive and
 * hands each to the application at once; here a connection's requests are handled one at a time,
 * in order, as nginx, HAProxy and Envoy do, and nothing read after an answer that closes the
 * connection is handled. Open connections are capped: at the cap, the connection idle the longest
 * is closed to make room, and without an idle one the new connection is closed unanswered.
 *
 * Each connection is owned here from accept to close, whichever of its states it is in: read by
 * Node's parser, taken at the `upgrade` event, handed back to the parser, a WebSocket. Node drops
 * its own listeners when it hands a socket over at `upgrade`; the listeners put on at accept stay
 * until the socket closes, so a reset in any state ends that connection only, and a connection
 * handed back is never admitted, nor listened to, a second time.
 */
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { AfterPending } from "./client-errors.js";
import type { Clock } from "../clock.js";
import { serveAsPlainHttp } from "./plain-upgrade.js";
import { watchSends } from "./send-deadline.js";

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
  /** Connections counted against `max_connections`: every one but the WebSockets. */
  readonly open: Map<Socket, Connection>;
  /** The longest idle first (a Set keeps insertion order). */
  readonly idle: Set<Connection>;
  /** WebSocket connections, from their handshake on: counted apart, against their own cap. */
  readonly websockets: Set<Socket>;
}

/** Marks a socket this registry owns, so that a connection handed back is not admitted again. */
const OWNED = Symbol("gatehouse.owned");
type OwnedSocket = Socket & { [OWNED]?: true };

// Every owned socket's error listener, for its whole life. Node's parser reports a client's errors
// while it reads the connection, and the relay while it relays one; in between (taken at the
// `upgrade` event, waiting for an answer owed, closing) an error without a listener would end the
// process. The error is followed by `close`, which is where a connection is let go of.
function ignoreError(): void {}

// Drops a connection that is closed or closing: nothing more is handled on it.
function forget(registry: Registry, connection: Connection): void {
  registry.open.delete(connection.socket);
  registry.idle.delete(connection);
  connection.accepting = false;
  connection.waiting.length = 0;
}

// Registers a new connection; at the cap, the oldest idle one makes room, or the new one is closed.
function admit(registry: Registry, socket: OwnedSocket, maxConnections: number): void {
  socket[OWNED] = true;
  socket.on("error", ignoreError);
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
  socket.once("close", () => {
    forget(registry, connection);
    registry.websockets.delete(socket);
  });
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

/** The caps on a server's connections, read at every connection and handshake (a reload changes them). */
export interface ConnectionCaps {
  /** Connections other than WebSockets. */
  readonly maxConnections: () => number;
  /** WebSocket connections, from their handshake on. */
  readonly maxWebSockets: () => number;
}

/**
 * Takes a request handed over for its Upgrade field, with the bytes read after it: true when it is
 * a WebSocket handshake, which then owns the connection's reading and answer; false to have it
 * served as plain HTTP. `room` says whether the handshake fits under the WebSocket cap.
 */
export type UpgradeTaker = (
  req: IncomingMessage,
  socket: Socket,
  rest: Buffer,
  room: boolean,
) => boolean;

/**
 * The listener for `upgrade`. Node hands over a connection at a request carrying Upgrade, and its
 * parser no longer reads it. Once the answers owed before that request are written, a WebSocket
 * handshake on a WebSocket route keeps it, and any other is given back to be served as plain
 * HTTP. Read behind an answer that closes (the connection is then forgotten or no longer
 * accepting), it is dropped like any other request, and that answer ends the connection.
 */
function takeUpgrades(
  server: Server,
  registry: Registry,
  caps: ConnectionCaps,
  upgrade: UpgradeTaker,
): (req: IncomingMessage, socket: Socket, rest: Buffer) => void {
  const { open, idle, websockets } = registry;
  return (req, socket, rest) => {
    const connection = open.get(socket);
    if (connection === undefined || !connection.accepting) return;
    // Nothing more is read from it as a request, and it is not resumed, until one of the two.
    connection.accepting = false;
    const takeOver = (): void => {
      connection.then = undefined;
      if (socket.destroyed) return;
      const room = websockets.size < caps.maxWebSockets();
      if (upgrade(req, socket, rest, room)) {
        idle.delete(connection);
        // A WebSocket is counted apart until it closes, so open WebSockets never lock plain
        // requests out; one refused for want of room stays among the other connections until
        // its refusal has closed it.
        if (room) {
          open.delete(socket);
          websockets.add(socket);
        }
        return;
      }
      // Served as plain HTTP: the same connection, read by a new parser.
      connection.accepting = true;
      connection.paused = false;
      idle.add(connection);
      serveAsPlainHttp(server, req, socket, rest);
    };
    if (connection.current === undefined) takeOver();
    else connection.then = takeOver;
  };
}

/** Takes over `server`'s connections: `handle` runs for one request of a connection at a time. */
export function manageConnections(
  server: Server,
  handle: Handler,
  caps: ConnectionCaps,
  upgrade: UpgradeTaker,
  clock: Clock,
): ManagedConnections {
  const registry: Registry = { open: new Map(), idle: new Set(), websockets: new Set() };
  const { open, idle } = registry;
  // A WebSocket's relay has deadlines of its own (idle, closing); every other connection this one.
  const sends = watchSends(() => open.keys(), clock);
  server.once("close", () => sends.cancel());

  // A connection handed back to be served as plain HTTP comes here again: it is owned already.
  server.on("connection", (socket: OwnedSocket) => {
    if (socket[OWNED] !== true) admit(registry, socket, caps.maxConnections());
  });

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

  server.on("upgrade", takeUpgrades(server, registry, caps, upgrade));

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
