/**
 * A client connection taken from the HTTP server for a WebSocket handshake, from the handshake to
 * its answer. Node's parser no longer reads it, so it is read here: a client that ends its half
 * (FIN) or resets while the handshake waits for the upstream's 101 is seen at once, and the
 * exchange, the upstream connection and the client's connection slot end with it. Bytes the client
 * sends before the answer (RFC 6455 §4.1 asks it to wait) are held, up to a bound, for the relay.
 */
import type { Socket } from "node:net";
import type { Clock, Timer } from "../clock.js";

/** Bytes held before the answer at most; past them the connection is no longer read until it. */
export const HELD_MAX = 64 * 1024;
/**
 * How long a refused handshake's connection may stay open after its answer: the client's FIN is
 * waited for (nginx's lingering close, so the answer is not lost to a reset), but not longer.
 */
export const LINGER_MS = 1_000;

export class TakenSocket {
  private held: Buffer[];
  private heldBytes: number;
  private linger: Timer | undefined;

  constructor(
    readonly socket: Socket,
    head: Buffer,
    private readonly clock: Clock,
  ) {
    this.held = head.length > 0 ? [head] : [];
    this.heldBytes = head.length;
    socket.on("data", this.hold);
    socket.on("end", this.gone);
    socket.once("close", this.closed);
    // A `data` listener resumes a socket nobody paused; one paused while requests waited is not.
    if (this.heldBytes < HELD_MAX) socket.resume();
    else socket.pause();
  }

  /**
   * The handshake succeeded: the bytes held so far, in order. The socket is left paused, to be
   * resumed by whoever reads it from now on.
   */
  take(): Buffer {
    this.stop();
    this.socket.pause();
    const held = this.held.length === 1 ? (this.held[0] as Buffer) : Buffer.concat(this.held);
    this.held = [];
    return held;
  }

  /**
   * The handshake was answered with a refusal, now written: the connection ends. What the client
   * still sends is read and dropped, so that its FIN is seen, and it is destroyed LINGER_MS after
   * the answer whatever the client does.
   */
  closeAfterAnswer(): void {
    this.stop();
    this.held = [];
    const { socket } = this;
    if (socket.destroyed) return;
    socket.on("end", this.gone);
    socket.end();
    socket.resume();
    this.linger = this.clock.after(LINGER_MS, () => socket.destroy());
  }

  private stop(): void {
    this.socket.removeListener("data", this.hold);
    this.socket.removeListener("end", this.gone);
  }

  private readonly hold = (chunk: Buffer): void => {
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes >= HELD_MAX) this.socket.pause();
  };

  // RFC 6455 §7.1.1 has no use for a half-open connection: a client that ends its half is gone.
  private readonly gone = (): void => {
    this.socket.destroy();
  };

  private readonly closed = (): void => {
    this.linger?.cancel();
  };
}
