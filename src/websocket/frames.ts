/**
 * Where one direction of a WebSocket connection stands among its frames (RFC 6455 §5.2), read as
 * its bytes pass untouched: so that a close frame of gatehouse's own goes in between two frames,
 * never inside one, and so that a peer's close frame is known for what it is.
 */
import { randomBytes } from "node:crypto";

/** The opcode of a close frame (RFC 6455 §5.5.1). */
const CLOSE_OPCODE = 0x8;

/** Follows the frames of one direction. */
export class FrameCursor {
  /** The header of the frame being read, while it is incomplete. */
  private readonly header = Buffer.alloc(14);
  private headerBytes = 0;
  /** Payload bytes of the current frame still to pass; 0 between frames. */
  private payloadLeft = 0;
  /** The peer sent a close frame: whatever follows it is no message. */
  closeSent = false;

  /** Between two frames: a frame of gatehouse's own can go now. */
  get atBoundary(): boolean {
    return this.headerBytes === 0 && this.payloadLeft === 0;
  }

  /**
   * Reads `chunk` from `from` and returns where, in it, the first frame boundary after `from`
   * is (its offset, `from` itself when the cursor is between frames), or -1 when the chunk ends
   * inside a frame. With `all`, reads on to the chunk's end and returns -1.
   */
  advance(chunk: Buffer, from = 0, all = true): number {
    let at = from;
    if (!all && this.atBoundary) return at;
    while (at < chunk.length) {
      if (this.payloadLeft > 0) {
        const taken = Math.min(this.payloadLeft, chunk.length - at);
        this.payloadLeft -= taken;
        at += taken;
      } else {
        at = this.readHeader(chunk, at);
      }
      if (!all && this.atBoundary) return at;
    }
    return -1;
  }

  // Takes header bytes from `chunk` at `at` until the header is whole; returns where it stopped.
  private readHeader(chunk: Buffer, at: number): number {
    const { header } = this;
    let offset = at;
    while (offset < chunk.length) {
      header[this.headerBytes++] = chunk[offset++] as number;
      const wanted = this.headerLength();
      if (wanted !== undefined && this.headerBytes === wanted) {
        this.startPayload();
        return offset;
      }
    }
    return offset;
  }

  // The whole header's length, once its first two bytes say it.
  private headerLength(): number | undefined {
    if (this.headerBytes < 2) return undefined;
    const second = this.header[1] as number;
    const length7 = second & 0x7f;
    const extended = length7 === 126 ? 2 : length7 === 127 ? 8 : 0;
    return 2 + extended + ((second & 0x80) !== 0 ? 4 : 0);
  }

  private startPayload(): void {
    const { header } = this;
    const length7 = (header[1] as number) & 0x7f;
    let length = length7;
    if (length7 === 126) length = header.readUInt16BE(2);
    else if (length7 === 127) length = Number(header.readBigUInt64BE(2));
    if (((header[0] as number) & 0x0f) === CLOSE_OPCODE) this.closeSent = true;
    this.headerBytes = 0;
    this.payloadLeft = length;
  }
}

/**
 * A close frame (RFC 6455 §5.5.1) with `code` and `reason` (at most 123 bytes), masked as a
 * client's frames must be (§5.3) when it goes to the upstream.
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  const text = Buffer.from(reason, "utf8").subarray(0, 123);
  const payload = Buffer.alloc(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  if (!masked) return Buffer.concat([Buffer.from([0x80 | CLOSE_OPCODE, payload.length]), payload]);
  const mask = randomBytes(4);
  for (let i = 0; i < payload.length; i++) {
    payload[i] = (payload[i] as number) ^ (mask[i % 4] as number);
  }
  return Buffer.concat([Buffer.from([0x80 | CLOSE_OPCODE, 0x80 | payload.length]), mask, payload]);
}
