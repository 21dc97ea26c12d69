/**
 * A request carrying `Upgrade` is served as plain HTTP/1.1: gatehouse forwards no other protocol,
 * and RFC 9110 §7.8 lets a server ignore the field. Node's parser stops reading a connection at
 * such a request, so a request that follows it in the same packet would be lost; instead Node
 * hands the connection over (the `upgrade` event), and it is given back to the HTTP server with
 * the request, less its Upgrade field, in front of the bytes that followed.
 */
import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";

/** The request head as received, less the Upgrade field that made Node stop reading. */
function headWithoutUpgrade(req: IncomingMessage): Buffer {
  let head = `${req.method ?? "GET"} ${req.url ?? "/"} HTTP/${req.httpVersion}\r\n`;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.toLowerCase() !== "upgrade") head += `${name}: ${raw[i + 1] as string}\r\n`;
  }
  // Node's parser refused CR, LF and NUL in the fields, so they are written back as they came.
  return Buffer.from(`${head}\r\n`, "latin1");
}

/** Gives `socket` back to `server`, which then reads `req` (less Upgrade) and `rest` first. */
export function serveAsPlainHttp(
  server: Server,
  req: IncomingMessage,
  socket: Socket,
  rest: Buffer,
): void {
  // Node's keep-alive timer may still run from the answer before; the new parser sets its own.
  socket.setTimeout(0);
  server.emit("connection", socket);
  socket.unshift(Buffer.concat([headWithoutUpgrade(req), rest]));
  socket.resume();
}
