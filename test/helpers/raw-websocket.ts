/**
 * WebSocket peers written byte by byte (RFC 6455), for tests where what matters is exactly which
 * frames and which FIN cross the wire, and when: a client on a raw socket, an upstream answering
 * handshakes from a raw upstream's handler, and a reader of the frames either one receives.
 */
import { createHash, randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import type { RawExchange } from "./raw-upstream.js";

/** RFC 6455 §1.3: the key's accept value. */
export function acceptOf(key: string): string {
  return createHash("sha1").update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
}

/** One frame as received: its opcode and unmasked payload. */
export interface Frame {
  readonly opcode: number;
  readonly payload: Buffer;
}

/** A close frame's code, or undefined for another frame. */
export function closeCode(frame: Frame): number | undefined {
  return frame.opcode === 0x8 && frame.payload.length >= 2
    ? frame.payload.readUInt16BE(0)
    : undefined;
}

/**
 * A frame's head (RFC 6455 §5.2) for `length` bytes of payload of `opcode`, with `mask` as its
 * masking key, or unmasked without one.
 */
export function frameHead(opcode: number, length: number, mask?: Buffer): Buffer {
  const masked = mask === undefined ? 0 : 0x80;
  let head: Buffer;
  if (length < 126) {
    head = Buffer.from([0x80 | opcode, masked | length]);
  } else if (length < 0x10000) {
    head = Buffer.from([0x80 | opcode, masked | 126, length >> 8, length & 0xff]);
  } else {
    head = Buffer.alloc(10);
    head[0] = 0x80 | opcode;
    head[1] = masked | 127;
    head.writeBigUInt64BE(BigInt(length), 2);
  }
  return mask === undefined ? head : Buffer.concat([head, mask]);
}

/** A frame of `opcode` with `payload`, masked as a client's must be (RFC 6455 §5.3). */
export function frame(opcode: number, payload: Buffer, masked: boolean): Buffer {
  if (!masked) return Buffer.concat([frameHead(opcode, payload.length), payload]);
  const mask = randomBytes(4);
  const body = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] as number)));
  return Buffer.concat([frameHead(opcode, payload.length, mask), body]);
}

/** A close frame with `code`. */
export function closeFrameOf(code: number, masked: boolean): Buffer {
  const payload = Buffer.alloc(2);
  payload.writeUInt16BE(code, 0);
  return frame(0x8, payload, masked);
}

/** Reads the frames arriving on `socket` after `skip` bytes, and whether the peer ended its half. */
export class FrameReader {
  readonly frames: Frame[] = [];
  ended = false;
  private pending = Buffer.alloc(0);

  constructor(socket: Socket, head: Buffer = Buffer.alloc(0)) {
    this.take(head);
    socket.on("data", (chunk: Buffer) => this.take(chunk));
    socket.on("end", () => (this.ended = true));
    socket.on("error", () => undefined);
  }

  /** The close codes received so far. */
  get closes(): number[] {
    return this.frames.map(closeCode).filter((code): code is number => code !== undefined);
  }

  private take(chunk: Buffer): void {
    this.pending = Buffer.concat([this.pending, chunk]);
    for (;;) {
      const bytes = this.pending;
      if (bytes.length < 2) return;
      const masked = ((bytes[1] as number) & 0x80) !== 0;
      const length7 = (bytes[1] as number) & 0x7f;
      const extended = length7 === 126 ? 2 : length7 === 127 ? 8 : 0;
      const start = 2 + extended + (masked ? 4 : 0);
      if (bytes.length < start) return;
      let length = length7;
      if (length7 === 126) length = bytes.readUInt16BE(2);
      else if (length7 === 127) length = Number(bytes.readBigUInt64BE(2));
      if (bytes.length < start + length) return;
      let payload = bytes.subarray(start, start + length);
      if (masked) {
        const mask = bytes.subarray(2 + extended, 6 + extended);
        payload = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] as number)));
      }
      this.frames.push({ opcode: (bytes[0] as number) & 0x0f, payload });
      this.pending = bytes.subarray(start + length);
    }
  }
}

/**
 * Answers a raw upstream's handshake with a valid 101, and from then on reads the connection as
 * frames: the returned reader has what the client side (gatehouse) sent.
 */
export function acceptHandshake(exchange: RawExchange): FrameReader {
  const { socket } = exchange;
  // The raw upstream's own request parser stops here: the connection is a WebSocket now.
  socket.removeAllListeners("data");
  const reader = new FrameReader(socket);
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      `Sec-WebSocket-Accept: ${acceptOf(exchange.headers["sec-websocket-key"] ?? "")}\r\n\r\n`,
  );
  return reader;
}

/** A client's raw connection after its handshake was answered. */
export interface RawWebSocket {
  readonly socket: Socket;
  /** The answer's status line and fields. */
  readonly head: string;
  readonly reader: FrameReader;
}

/**
 * Sends a WebSocket handshake for `path` with `headers` on a raw connection to `port` (which stays
 * open after a FIN from gatehouse): the socket at once, and the answer once its head has arrived.
 */
export function startHandshake(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): { readonly socket: Socket; readonly answered: Promise<RawWebSocket> } {
  const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
  const answered = new Promise<RawWebSocket>((resolve, reject) => {
    let received = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf("\r\n\r\n");
      if (end === -1) return;
      socket.removeListener("data", onData);
      socket.removeListener("error", reject);
      const head = received.subarray(0, end).toString("latin1");
      resolve({ socket, head, reader: new FrameReader(socket, received.subarray(end + 4)) });
    };
    socket.on("data", onData);
    socket.on("error", reject);
  });
  const fields = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: gatehouse.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n` +
      `${fields}\r\n`,
  );
  return { socket, answered };
}

/** Sends a WebSocket handshake (see startHandshake) and resolves once it is answered. */
export function rawHandshake(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<RawWebSocket> {
  return startHandshake(port, path, headers).answered;
}
