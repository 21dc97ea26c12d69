/**
 * Relaying bytes that may come in pieces as small as one byte (an upstream's one-byte chunks, a
 * peer's one-byte TCP segments) to a reader that is slow. Node's stream buffers count bytes, and
 * each piece in them is an object of its own, hundreds of bytes of bookkeeping (the piece, its
 * entry, a body's chunked framing): a high-water mark of 16 or 64 KiB let one-byte pieces pile up
 * megabytes per slow reader, on the way out (a write each) as on the way in (a paused socket
 * reads on until its buffer holds a high-water mark of them). Here pieces are held in bounds, in
 * bytes and in number, and passed on joined.
 */
import type { Readable, Writable } from "node:stream";

// What is held while a write is under way; past either bound the source is to stop until that
// write is done. Pieces are counted too: each is an object of its own, so 64 KiB of one-byte
// pieces would be 64 Ki of them.
const HOLD_BYTES = 64 * 1024;
const HOLD_PIECES = 1024;

/** Pieces of bytes kept in order, taken as one. */
class Pieces {
  private list: Buffer[] | null = null;
  bytes = 0;

  get count(): number {
    return this.list?.length ?? 0;
  }

  add(piece: Buffer): void {
    (this.list ??= []).push(piece);
    this.bytes += piece.length;
  }

  /** The pieces as one, or null when there are none. */
  take(): Buffer | null {
    const { list, bytes } = this;
    if (list === null || list.length === 0) return null;
    const piece = list.length === 1 ? (list[0] as Buffer) : Buffer.concat(list, bytes);
    list.length = 0;
    this.bytes = 0;
    return piece;
  }

  clear(): void {
    this.list = null;
    this.bytes = 0;
  }
}

/** What held writes go to: a response to a client, a socket. */
export type Sink = Pick<Writable, "write" | "end">;

/**
 * The writes to one sink, one at a time: the pieces that come while a write is under way are
 * held, and written as one when it is done.
 */
export class HeldWrites {
  /** A write is under way: its callback has not run. */
  private writing = false;
  private readonly held = new Pieces();
  /** The source was told to stop: it is resumed once what was held is written. */
  private stopped = false;
  /** Nothing more is written: the sink was ended, or failed, or let go. */
  private closed = false;

  constructor(
    private readonly sink: Sink,
    /** Resumes the source that `write` told to stop. */
    private readonly resume: () => void,
  ) {}

  /**
   * Writes `piece` now, or holds it behind the write under way. False when the source is to stop
   * until `resume` is called: what is held has reached its bounds.
   */
  write(piece: Buffer): boolean {
    if (this.closed) return true;
    if (!this.writing) {
      this.writeNow(piece);
      return true;
    }
    const { held } = this;
    held.add(piece);
    if (held.bytes < HOLD_BYTES && held.count < HOLD_PIECES) return true;
    this.stopped = true;
    return false;
  }

  /** Ends the sink after what is held. */
  end(): void {
    if (this.closed) return;
    this.closed = true;
    const held = this.held.take();
    if (held === null) this.sink.end();
    else this.sink.end(held);
  }

  /** Nothing more is written, and what is held is let go: the sink is gone. */
  drop(): void {
    this.closed = true;
    this.held.clear();
  }

  private writeNow(piece: Buffer): void {
    this.writing = true;
    this.sink.write(piece, this.written);
  }

  /** The write under way is done, or failed: then the sink is gone, and so is what is held. */
  private readonly written = (error?: Error | null): void => {
    this.writing = false;
    if (error !== undefined && error !== null) this.drop();
    if (this.closed) return;
    const held = this.held.take();
    if (held === null) return;
    this.writeNow(held);
    if (!this.stopped) return;
    this.stopped = false;
    // Resuming reads the source at once, and may hold more pieces behind this write.
    this.resume();
  };
}

/**
 * The reads of one socket (or other readable), for a reader that stops now and then. While it
 * is stopped the pieces read are held, joined every HOLD_PIECES, until they reach the socket's
 * high-water mark; then the socket is paused with them put back as one piece (`unshift`), so its
 * buffer is full and it reads no more. A socket merely paused would read on until its buffer
 * held a high-water mark of pieces: 64 Ki objects of one byte each.
 */
export class HeldReads {
  private readonly held = new Pieces();
  private stopped = false;

  constructor(
    private readonly source: Readable,
    /** Takes each piece read, in order, whenever the reader is not stopped. */
    private readonly take: (piece: Buffer) => void,
  ) {
    source.on("data", this.read);
  }

  /** The reader takes no more until `go`. */
  stop(): void {
    this.stopped = true;
  }

  /** The reader takes again: what was held first, then what the socket reads. */
  go(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.flush();
    // A socket paused with what was held put back passes that on first.
    if (!this.stopped) this.source.resume();
  }

  /** The reader takes what is held now, stopped or not: the socket has ended. */
  flush(): void {
    const held = this.held.take();
    if (held !== null) this.take(held);
  }

  private readonly read = (piece: Buffer): void => {
    if (!this.stopped) {
      this.take(piece);
      return;
    }
    const { held, source } = this;
    held.add(piece);
    if (held.bytes >= source.readableHighWaterMark) {
      source.pause();
      source.unshift(held.take() as Buffer);
    } else if (held.count >= HOLD_PIECES) {
      held.add(held.take() as Buffer);
    }
  };
}
