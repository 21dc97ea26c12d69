/** Sends bytes exactly as written over a real socket and reads the raw answer. */
import { connect } from "node:net";

/** A raw HTTP answer: status, lower-cased headers (repeated ones joined) and body text. */
export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly text: string;
}

/** Writes `request` to 127.0.0.1:port and resolves with the first response once the socket ends or idles. */
export function rawRequest(
  port: number,
  request: string | Buffer,
  idleMs = 300,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponse(Buffer.concat(chunks).toString("latin1")));
    };
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      clearTimeout(timer);
      timer = setTimeout(finish, idleMs);
    });
    socket.on("end", finish);
    socket.on("error", (error) => (chunks.length > 0 ? finish() : reject(error)));
    socket.write(request);
  });
}

/** Parses the first response in `text`. */
export function parseResponse(text: string): RawResponse {
  const end = text.indexOf("\r\n\r\n");
  const head = end === -1 ? text : text.slice(0, end);
  const [statusLine = "", ...lines] = head.split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return {
    status: Number(statusLine.split(" ")[1]),
    headers,
    body: end === -1 ? "" : text.slice(end + 4),
    text,
  };
}
