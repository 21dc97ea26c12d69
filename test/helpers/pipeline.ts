/** Several requests written at once on one raw connection, and every response read back. */
import { connect, type Socket } from "node:net";
import { parseResponse, type RawResponse } from "./raw.js";

/** What one connection gave back. */
export interface Exchanged {
  readonly responses: RawResponse[];
  /** Whether the server closed the connection (rather than the helper, once enough arrived). */
  readonly closedByServer: boolean;
  /** Every byte received, for checks that nothing followed. */
  readonly text: string;
}

/** The length of a chunked body at the start of `text` (no trailers), or -1 if incomplete. */
function chunkedLength(text: string): number {
  let at = 0;
  for (;;) {
    const line = text.indexOf("\r\n", at);
    if (line === -1) return -1;
    const size = parseInt(text.slice(at, line), 16);
    if (size === 0) return text.startsWith("\r\n", line + 2) ? line + 4 : -1;
    at = line + 2 + size + 2;
    if (at > text.length) return -1;
  }
}

/**
 * Splits `text` into complete responses, framed by Content-Length or chunked; a trailing partial
 * response is left out. Bodies of chunked responses are kept as sent (chunk sizes included).
 */
export function splitResponses(text: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = text;
  for (;;) {
    const end = rest.indexOf("\r\n\r\n");
    if (end === -1) return responses;
    const head = parseResponse(rest.slice(0, end + 4));
    const length =
      head.headers["transfer-encoding"] === "chunked"
        ? chunkedLength(rest.slice(end + 4))
        : Number(head.headers["content-length"] ?? 0);
    if (length === -1 || rest.length < end + 4 + length) return responses;
    responses.push(parseResponse(rest.slice(0, end + 4 + length)));
    rest = rest.slice(end + 4 + length);
  }
}

/**
 * Opens a connection to 127.0.0.1:port, writes `bytes` in one write and reads until the server
 * closes it or `expected` complete responses arrived (then the helper closes it).
 */
export function exchange(port: number, bytes: string, expected: number): Promise<Exchanged> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    let closedByServer = true;
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      text += chunk;
      if (splitResponses(text).length >= expected) {
        closedByServer = false;
        socket.destroy();
      }
    });
    socket.on("error", (error) => (text === "" ? reject(error) : undefined));
    socket.on("close", () => resolve({ responses: splitResponses(text), closedByServer, text }));
    socket.write(bytes);
  });
}

/** Opens a connection and resolves once it is established. */
export function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Resolves with every byte the socket receives until it closes. */
export function untilClosed(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("error", () => undefined);
    if (socket.destroyed) resolve(text);
    else socket.on("close", () => resolve(text));
  });
}
