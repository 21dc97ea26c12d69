/**
 * One WebSocket connection, once the upstream's 101 has reached the client: its bytes pass both
 * ways untouched, each way with backpressure (a side that does not read stops the other from
 * being read), until one side closes, it is idle for too long, or gatehouse closes it (its token
 * ended, shutdown). gatehouse's own close frames (RFC 6455 §5.5.1) go in between two frames, never
 * inside one: a direction in the middle of a frame is relayed until that frame ends.
 */
import type { Duplex } from "node:stream";
import type { Clock, Timer } from "../clock.js";
import type { ConnectionEnd } from "../core/context.js";
import { HeldReads, HeldWrites } from "../http/held-pieces.js";
import { closeFrame, FrameCursor } from "./frames.js";

/** Why a connection ended. */
export type CloseReason =
  | "close_frame"
  | "connection_closed"
  | "idle"
  | "token_expired"
  | "revoked"
  | "client_removed"
  | "shutdown";

/** What a connection did, when it ends. */
export interface RelayEnd extends ConnectionEnd {
  readonly reason: CloseReason;
}

/** What a relay is made with. */
export interface RelayOptions {
  readonly clock: Clock;
  /** No frame either way for this long: closed with 1001. */
  readonly idleMs: number;
  /** Bytes passed, each time some do. */
  readonly counted: (direction: "in" | "out", bytes: number) => void;
  readonly ended: (end: RelayEnd) => void;
}

/** How long the peers get to finish their frames and close once gatehouse has begun to close. */
export const CLOSING_MS = 5_000;

/** One direction: a source whose bytes go to a sink, and where they stand among frames. */
interface Direction {
  readonly from: Duplex;
  readonly to: Duplex;
  /** The reads of `from`, held while `to` takes no more. */
  readonly reads: HeldReads;
  /** The writes to `to`, one at a time: gatehouse's close frame and FIN go after what is held. */
  readonly writes: HeldWrites;
  readonly cursor: FrameCursor;
  /** Frames from the client are masked; so must gatehouse's be, toward the upstream. */
  readonly masked: boolean;
  readonly name: "in" | "out";
  /** gatehouse's close frame has gone this way: nothing more is relayed. */
  done: boolean;
}

export class Relay {
  private readonly in: Direction;
  private readonly out: Direction;
  private bytesIn = 0;
  private bytesOut = 0;
  private lastActive: number;
  private idleTimer: Timer;
  private closing: { code: number; words: string } | undefined;
  private closingTimer: Timer | undefined;
  private end: { closedBy: RelayEnd["closedBy"]; reason: CloseReason } | undefined;
  private finished = false;

  constructor(
    private readonly client: Duplex,
    private readonly upstream: Duplex,
    private readonly options: RelayOptions,
  ) {
    this.in = this.direction(client, upstream, "in");
    this.out = this.direction(upstream, client, "out");
    this.lastActive = options.clock.monotonic();
    this.idleTimer = options.clock.after(options.idleMs, () => this.checkIdle());
    for (const direction of [this.in, this.out]) this.relay(direction);
  }

  /** Relays `bytes` from the client as if they had just arrived on its connection. */
  fromClient(bytes: Buffer): void {
    this.passed(this.in, bytes);
  }

  /** Closes the connection with `code` (1008, 1001) and `words`, to both sides. */
  close(code: number, reason: CloseReason, words: string): void {
    if (this.closing !== undefined || this.finished) return;
    this.end ??= { closedBy: "gatehouse", reason };
    this.closing = { code, words };
    this.closeSoon();
    for (const direction of [this.in, this.out]) {
      if (direction.cursor.atBoundary) this.sendClose(direction);
    }
  }

  // Bytes go from `from` to `to` as they come, one write at a time (see HeldWrites), the source
  // stopped while the sink takes no more: a peer's one-byte TCP segments would otherwise each be
  // a write of their own, and a read of their own in a paused socket, hundreds of bytes of Node's
  // bookkeeping apiece.
  private direction(from: Duplex, to: Duplex, name: Direction["name"]): Direction {
    const direction: Direction = {
      from,
      to,
      reads: new HeldReads(from, (chunk) => this.passed(direction, chunk)),
      writes: new HeldWrites(to, () => direction.reads.go()),
      cursor: new FrameCursor(),
      masked: name === "in",
      name,
      done: false,
    };
    return direction;
  }

  private relay(direction: Direction): void {
    const { from, to } = direction;
    // A side that ends its half ends the other side's too, and is gone: WebSocket has no use for
    // a half-open connection (RFC 6455 §7.1.1). What the other side still sends within
    // CLOSING_MS is relayed; then both are closed, whether or not the other side ended its half.
    from.on("end", () => {
      this.ended(direction, "connection_closed");
      // What was read while the other side took no more goes before the end.
      direction.reads.flush();
      if (!direction.done) direction.writes.end();
      this.closeSoon();
    });
    from.on("error", () => {
      this.ended(direction, "connection_closed");
      this.destroy();
    });
    from.on("close", () => {
      this.ended(direction, "connection_closed");
      // The other side has what was written to it, and CLOSING_MS to go too.
      if (this.client.destroyed && this.upstream.destroyed) this.destroy();
      else if (!to.destroyed) direction.writes.end();
      this.closeSoon();
    });
  }

  // Both sides are closed within CLOSING_MS from now, if not before.
  private closeSoon(): void {
    // A connection already gone arms no timer, which would hold it, buffers and all, till then.
    if (this.finished) return;
    this.closingTimer ??= this.options.clock.after(CLOSING_MS, () => this.destroy());
  }

  private passed(direction: Direction, chunk: Buffer): void {
    this.lastActive = this.options.clock.monotonic();
    if (direction.done) {
      // gatehouse's close frame went this way: nothing more is relayed, but the frames are still
      // followed, for the other side's close frame.
      this.follow(direction, chunk, 0);
      return;
    }
    const { cursor } = direction;
    let bytes = chunk;
    let cut = -1;
    if (this.closing !== undefined) {
      // Only the rest of the frame under way goes on; then gatehouse's close frame.
      cut = cursor.advance(chunk, 0, false);
      if (cut !== -1) bytes = chunk.subarray(0, cut);
    } else {
      const closedBefore = cursor.closeSent;
      cursor.advance(chunk);
      if (cursor.closeSent && !closedBefore) {
        this.ended(direction, "close_frame");
        // RFC 6455 §7.1.1: the other side answers with a close frame of its own; a close left
        // unanswered ends the connection within CLOSING_MS.
        this.closeSoon();
      }
    }
    this.count(direction, bytes.length);
    if (bytes.length > 0 && !direction.writes.write(bytes)) direction.reads.stop();
    if (this.closing !== undefined && cursor.atBoundary) {
      this.sendClose(direction);
      if (cut !== -1 && cut < chunk.length) this.follow(direction, chunk, cut);
    } else if (cursor.closeSent) {
      this.settle();
    }
  }

  // Follows bytes of `direction` that are not relayed, from `at` on.
  private follow(direction: Direction, chunk: Buffer, at: number): void {
    direction.cursor.advance(chunk, at);
    this.settle();
  }

  private count(direction: Direction, bytes: number): void {
    if (direction.name === "in") this.bytesIn += bytes;
    else this.bytesOut += bytes;
    this.options.counted(direction.name, bytes);
  }

  // gatehouse's close frame goes this way, unless the other side's own close frame went already:
  // a side never gets a second one (RFC 6455 §5.5.1). Nothing more is relayed this way.
  private sendClose(direction: Direction): void {
    const { closing } = this;
    if (closing === undefined || direction.done) return;
    direction.done = true;
    if (!direction.cursor.closeSent) {
      // After what is held: the close frame follows every byte relayed before it. The source is
      // not stopped for it, since what it sends from now on is followed, not relayed.
      direction.writes.write(closeFrame(closing.code, closing.words, direction.masked));
    }
    this.settle();
  }

  // A side that has been sent a close frame and has sent its own has closed its WebSocket
  // (RFC 6455 §7.1.1): its TCP connection ends then, and not before, so it reads the close frame
  // before the FIN.
  private settle(): void {
    for (const [toward, from] of [
      [this.out, this.in],
      [this.in, this.out],
    ] as const) {
      const side = toward.to;
      const closedToward = toward.done || toward.cursor.closeSent;
      if (closedToward && from.cursor.closeSent && !side.writableEnded && !side.destroyed) {
        toward.writes.end();
      }
    }
  }

  // The first side to close says who closed the connection, and how.
  private ended(direction: Direction, reason: CloseReason): void {
    this.end ??= { closedBy: direction.name === "in" ? "client" : "upstream", reason };
  }

  private checkIdle(): void {
    if (this.finished || this.closing !== undefined) return;
    const quiet = this.options.clock.monotonic() - this.lastActive;
    if (quiet >= this.options.idleMs) {
      this.close(1001, "idle", "no frame within the idle timeout");
      return;
    }
    this.idleTimer = this.options.clock.after(this.options.idleMs - quiet, () => this.checkIdle());
  }

  private destroy(): void {
    if (this.finished) return;
    this.finished = true;
    this.idleTimer.cancel();
    this.closingTimer?.cancel();
    this.client.destroy();
    this.upstream.destroy();
    const end = this.end ?? { closedBy: "gatehouse", reason: "connection_closed" };
    this.options.ended({ bytesIn: this.bytesIn, bytesOut: this.bytesOut, ...end });
  }
}
