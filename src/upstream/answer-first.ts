/**
 * Upstream sockets on which the upstream's answer wins over a failed write of the request body.
 *
 * An upstream may answer before it has read the whole body (a 413, a 401) and close its
 * connection; RFC 9112 §9.5 expects the sender to stop and read that answer. Its kernel resets the
 * connection on the next bytes gatehouse sends, and gatehouse's write fails (EPIPE or ECONNRESET)
 * while the answer, which came before the reset, is still unread on the socket. A net.Socket
 * destroys itself on a failed write, synchronously after the write call, before the event loop
 * reads again: the answer would be thrown away and the client given a 502 for a request the
 * upstream did answer.
 *
 * On these sockets such a write failure is not an error of its own: the bytes are dropped, and the
 * read side, which meets the same closed connection right after reading what the upstream sent,
 * ends the exchange with the upstream's answer, or with a reset when there was none. undici, like
 * Node's own client, hears of the failed write first; gatehouse's connector (forwarder.ts) hands
 * it sockets that leave the decision to the read side.
 */
import type { Socket } from "node:net";

type WriteCallback = (error?: Error | null) => void;

// Write errors that only say the upstream closed the connection; any other one stays an error.
const CLOSED_CONNECTION: ReadonlySet<string> = new Set(["EPIPE", "ECONNRESET"]);

function readSideDecides(callback: WriteCallback): WriteCallback {
  return (error) => {
    const code = (error as NodeJS.ErrnoException | null | undefined)?.code;
    callback(code !== undefined && CLOSED_CONNECTION.has(code) ? null : error);
  };
}

/** Makes `socket` leave a closed connection to its read side (see above). */
export function answerFirst(socket: Socket): void {
  const writeOne = socket._write;
  socket._write = function (this: Socket, chunk, encoding, callback) {
    writeOne.call(this, chunk, encoding, readSideDecides(callback));
  };
  const writeMany = socket._writev;
  if (writeMany !== undefined) {
    socket._writev = function (this: Socket, chunks, callback) {
      writeMany.call(this, chunks, readSideDecides(callback));
    };
  }
}
