/**
 * The send deadline, nginx's `send_timeout`: a connection whose client has taken none of its
 * answer for about a minute is closed. Without it a client that asks for a large answer and never
 * reads holds its connection, and through the answer's backpressure an upstream connection too,
 * for as long as it likes: the upstream pool's size of them starve every other client. Only
 * connections with bytes waiting to be sent are looked at, once per SEND_CHECK_MS, so the request
 * path pays nothing for it. The connection is reset, as nginx's `reset_timedout_connection` does:
 * the kernel drops what it still held for a client that was not reading, and the client learns at
 * once that the answer is cut.
 */
import type { Socket } from "node:net";
import type { Clock, Timer } from "../clock.js";

/** How often connections with bytes waiting are looked at. */
export const SEND_CHECK_MS = 15_000;
/** Looks in a row that found no byte taken, after which the connection is closed (60 to 75 s). */
export const SEND_STALLS = 4;

/** Where a connection's sending stood at the last look. */
interface Progress {
  written: number;
  waiting: number;
  stalls: number;
}

/** Closes the connections of `sockets` that stopped taking their answers; cancel to stop. */
export function watchSends(sockets: () => Iterable<Socket>, clock: Clock): Timer {
  const seen = new WeakMap<Socket, Progress>();
  return clock.every(SEND_CHECK_MS, () => {
    for (const socket of sockets()) {
      const waiting = socket.writableLength;
      if (waiting === 0) {
        seen.delete(socket);
        continue;
      }
      const written = socket.bytesWritten;
      const last = seen.get(socket);
      if (last === undefined || last.written !== written || last.waiting !== waiting) {
        seen.set(socket, { written, waiting, stalls: 0 });
      } else if (++last.stalls >= SEND_STALLS) {
        socket.resetAndDestroy();
      }
    }
  });
}
