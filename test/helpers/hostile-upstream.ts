/**
 * An upstream on 127.0.0.1:0 whose every answer is chosen by the request's path,
 * `/<route>/<marker>/<behaviour>/<offset>`: a normal answer (a WebSocket 101 with frames echoed,
 * for a handshake), or the same answer cut by a reset or a FIN at a byte offset, written a byte
 * at a time, replaced by garbage or by a 101 with the wrong accept key, followed by a second
 * answer nobody asked for, or never written. Every answer carries the marker, so a test can tell
 * whose answer a client got. It counts the connections it holds and which of them are busy.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { WebSocketServer, type RawData } from "ws";

/** What the upstream does with one request. */
export const BEHAVIOURS = [
  "answer",
  "reset",
  "fin",
  "tiny",
  "garbage",
  "bad-accept",
  "extra",
  "silent",
] as const;

/** One of BEHAVIOURS. */
export type Behaviour = (typeof BEHAVIOURS)[number];

/** A running hostile upstream. */
export interface HostileUpstream {
  readonly url: string;
  /** Connections open to it now. */
  open(): number;
  /** Connections open with a request unanswered, an answer under way, or switched protocols. */
  busy(): number;
  close(): Promise<void>;
}

// RFC 6455 §1.3: the GUID appended to the client's key for Sec-WebSocket-Accept.
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** The Sec-WebSocket-Accept answering `key` (RFC 6455 §4.2.2). */
export function acceptFor(key: string): string {
  return createHash("sha1").update(`${key}${GUID}`).digest("base64");
}

/** An unmasked frame from a server (RFC 6455 §5.2) with `payload`, short enough for 7 bits. */
function serverFrame(opcode: number, payload: Buffer): Buffer {
  return Buffer.concat([Buffer.from([0x80 | opcode, payload.length]), payload]);
}

/** What the request's path asks for; a path of another shape gets a normal answer. */
function readPath(url: string): { marker: string; behaviour: Behaviour; offset: number } {
  const [, , marker = "-", behaviour = "answer", offset = "0"] =
    url.split("?")[0]?.split("/") ?? [];
  const known = (BEHAVIOURS as readonly string[]).includes(behaviour);
  return {
    marker,
    behaviour: known ? (behaviour as Behaviour) : "answer",
    offset: Number(offset) || 0,
  };
}

/** Bytes from a small generator seeded by `seed`, none of them `m`, so never a marker. */
function garbage(seed: number, length: number): Buffer {
  const bytes = Buffer.alloc(length);
  let state = (seed * 2654435761 + 1) >>> 0;
  for (let i = 0; i < length; i++) {
    state = (state * 1664525 + 1013904223) >>> 0;
    const byte = state >>> 24;
    bytes[i] = byte === 0x6d ? 0x4d : byte;
  }
  return bytes;
}

/** A whole HTTP/1.1 answer to `req`, echoing its marker and target. */
function plainAnswer(req: IncomingMessage, marker: string, extra = ""): Buffer {
  const body = JSON.stringify({ marker, method: req.method, url: req.url, extra });
  return Buffer.from(
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-marker: ${marker}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** A 101 for a WebSocket handshake with `accept`, then a text frame naming the marker. */
function switching(accept: string, marker: string): Buffer {
  return Buffer.concat([
    Buffer.from(
      "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" +
        `sec-websocket-accept: ${accept}\r\nx-marker: ${marker}\r\n\r\n`,
    ),
    serverFrame(1, Buffer.from(`hello ${marker}`)),
  ]);
}

/** Writes `bytes` one at a time, each on a later turn of the event loop; then `done`. */
function trickle(socket: Socket, bytes: Buffer, done: () => void): void {
  let at = 0;
  const next = (): void => {
    if (socket.destroyed) return;
    if (at === bytes.length) {
      done();
      return;
    }
    socket.write(bytes.subarray(at, ++at));
    setImmediate(next);
  };
  next();
}

/** Starts the upstream. */
export async function startHostileUpstream(): Promise<HostileUpstream> {
  const sockets = new Map<Socket, { busy: boolean }>();
  const wss = new WebSocketServer({ noServer: true });
  wss.on("connection", (ws, req) => {
    // A hostile client's frames make ws close the connection with an error: that is its answer.
    ws.on("error", () => ws.terminate());
    ws.on("message", (data: RawData, binary: boolean) => ws.send(data, { binary }));
    ws.send(`hello ${readPath(req.url ?? "").marker}`);
  });

  // The answer of a behaviour other than "answer", written on the raw socket; `key` is the
  // WebSocket key of a handshake, undefined for a plain request.
  function misbehave(req: IncomingMessage, socket: Socket, key: string | undefined): void {
    const { marker, behaviour, offset } = readPath(req.url ?? "");
    const whole = key === undefined ? plainAnswer(req, marker) : switching(acceptFor(key), marker);
    const at = offset % (whole.length + 1);
    switch (behaviour) {
      case "reset":
        if (at === 0) socket.resetAndDestroy();
        else socket.write(whole.subarray(0, at), () => socket.resetAndDestroy());
        return;
      case "fin":
        socket.end(whole.subarray(0, at));
        return;
      case "tiny":
        // A plain answer ends its connection; after a 101 what the client sends comes back.
        trickle(socket, whole, () => (key === undefined ? socket.end() : socket.pipe(socket)));
        return;
      case "garbage":
        socket.end(garbage(offset, 1 + (offset % 300)));
        return;
      case "bad-accept":
        socket.write(switching(acceptFor(`${key ?? ""}wrong`), marker));
        return;
      case "extra": {
        socket.write(Buffer.concat([whole, plainAnswer(req, marker, "unasked")]));
        // Left open, as if the answer had been one: a pool may take the connection again.
        const state = sockets.get(socket);
        if (state !== undefined) state.busy = false;
        return;
      }
      case "silent":
      case "answer":
        return;
    }
  }

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const state = sockets.get(req.socket);
    if (state !== undefined) state.busy = true;
    req.resume();
    const { marker, behaviour, offset } = readPath(req.url ?? "");
    if (behaviour !== "answer") {
      misbehave(req, req.socket, undefined);
      return;
    }
    res.on("finish", () => {
      if (state !== undefined) state.busy = false;
    });
    const body = JSON.stringify({ marker, method: req.method, url: req.url });
    // An odd offset asks for a chunked answer, an even one for a Content-Length.
    const length = offset % 2 === 0 ? { "content-length": Buffer.byteLength(body) } : {};
    res.writeHead(200, { "content-type": "application/json", "x-marker": marker, ...length });
    res.end(body);
  });
  server.on("connection", (socket: Socket) => {
    sockets.set(socket, { busy: false });
    // Kept after an upgrade, when the HTTP server's own listeners are gone.
    socket.on("error", () => socket.destroy());
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const state = sockets.get(socket);
    if (state !== undefined) state.busy = true;
    const { marker, behaviour } = readPath(req.url ?? "");
    const websocket = req.headers.upgrade?.toLowerCase() === "websocket";
    // Taken from the HTTP server, which lets connections stay half open: gatehouse's FIN ends it
    // here too, and what follows a handshake is read (and dropped, unless echoed).
    socket.on("end", () => socket.end());
    if (behaviour === "answer" && websocket) {
      wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
      return;
    }
    if (behaviour !== "tiny") socket.resume();
    if (behaviour === "answer") socket.end(plainAnswer(req, marker));
    else misbehave(req, socket, websocket ? (req.headers["sec-websocket-key"] ?? "") : undefined);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => sockets.size,
    busy: () => [...sockets.values()].filter((state) => state.busy).length,
    close: () =>
      new Promise<void>((done) => {
        for (const socket of sockets.keys()) socket.destroy();
        wss.close();
        server.close(() => done());
      }),
  };
}
