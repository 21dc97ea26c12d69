/**
 * An upstream on 127.0.0.1:0 that writes its answers as raw bytes, for the cases where the exact
 * wire matters: informational responses, framing fields a Node server would not send, a socket
 * closed at a chosen moment.
 */
import { createServer, type AddressInfo, type Server, type Socket } from "node:net";

/** One request head as the upstream read it, and the connection it came on. */
export interface RawExchange {
  readonly socket: Socket;
  readonly method: string;
  readonly path: string;
  /** The request head, lower-cased field names. */
  readonly headers: Record<string, string>;
  /** The field names as they came on the wire, in order, repeated ones each time. */
  readonly rawNames: readonly string[];
  /** 0 for the first connection gatehouse opened, 1 for the next... */
  readonly connection: number;
  /** 0 for the first request on its connection, 1 for the next... */
  readonly index: number;
}

/** Called once per request head; the body (Content-Length only) is read and discarded after it. */
export type RawHandler = (exchange: RawExchange) => void;

/** A running raw upstream. */
export interface RawUpstream {
  readonly url: string;
  readonly port: number;
  /** Every request head received, in order. */
  readonly received: RawExchange[];
  handler: RawHandler;
  close(): Promise<void>;
}

/** Starts a raw upstream; `handler` answers each request by writing to `exchange.socket`. */
export async function startRawUpstream(handler: RawHandler): Promise<RawUpstream> {
  const received: RawExchange[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    const connection = connections++;
    let index = 0;
    let pending = Buffer.alloc(0);
    let bodyLeft = 0;
    socket.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        if (bodyLeft > 0) {
          const skipped = Math.min(bodyLeft, pending.length);
          bodyLeft -= skipped;
          pending = pending.subarray(skipped);
          if (bodyLeft > 0) return;
        }
        const end = pending.indexOf("\r\n\r\n");
        if (end === -1) return;
        const [line = "", ...fields] = pending.subarray(0, end).toString("latin1").split("\r\n");
        pending = pending.subarray(end + 4);
        const headers: Record<string, string> = {};
        const rawNames: string[] = [];
        for (const field of fields) {
          const colon = field.indexOf(":");
          const name = field.slice(0, colon).trim();
          rawNames.push(name);
          headers[name.toLowerCase()] = field.slice(colon + 1).trim();
        }
        bodyLeft = Number(headers["content-length"] ?? 0);
        const [method = "", path = ""] = line.split(" ");
        const exchange = { socket, method, path, headers, rawNames, connection, index: index++ };
        received.push(exchange);
        upstream.handler(exchange);
        if (socket.destroyed) return;
      }
    });
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  const upstream: RawUpstream = {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    handler,
    close: () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
  return upstream;
}
