/**
 * gatehouse's answers to the requests that Node's HTTP parser refuses before any request object
 * exists (the server's `clientError` event): the same JSON error bodies as every other answer.
 */
import type { ServerResponse } from "node:http";
import { http } from "./node-http.js";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { ErrorCode } from "./error-codes.js";

/** What one parser error is answered with. */
interface ClientErrorAnswer {
  readonly status: number;
  readonly code: ErrorCode;
  readonly message: string;
}

// Fixed descriptions only: the offending bytes (err.rawPacket, err.reason) are never reflected.
const MALFORMED: ClientErrorAnswer = {
  status: 400,
  code: "invalid_request",
  message: "the request is not valid HTTP/1.1",
};

const invalid = (message: string): ClientErrorAnswer => ({ ...MALFORMED, message });

const LINE_ENDINGS = invalid("every line of the request must end with CRLF");
const CONTENT_LENGTH = invalid(
  "Content-Length must be one decimal number, sent once and never with Transfer-Encoding",
);

/** By llhttp's error code (`err.code`); anything else gets MALFORMED. */
const ANSWERS: ReadonlyMap<string, ClientErrorAnswer> = new Map([
  // RFC 6585 §5; Node refuses a header section over --max-http-header-size (16 KiB by default).
  [
    "HPE_HEADER_OVERFLOW",
    {
      status: 431,
      code: "request_header_fields_too_large",
      message: `the request header section must be at most ${http.maxHeaderSize} bytes`,
    },
  ],
  // RFC 9112 §7.1.1: Node caps chunk extensions at 16 KiB (CVE-2024-22019) and answers 413.
  [
    "HPE_CHUNK_EXTENSIONS_OVERFLOW",
    {
      status: 413,
      code: "payload_too_large",
      message: "the chunk extensions must be at most 16 KiB",
    },
  ],
  // Node's headersTimeout and requestTimeout (RFC 9110 §15.5.9).
  [
    "ERR_HTTP_REQUEST_TIMEOUT",
    { status: 408, code: "request_timeout", message: "the request was not received in time" },
  ],
  // RFC 9110 §9.1: methods are case-sensitive tokens; llhttp accepts the registered ones only.
  [
    "HPE_INVALID_METHOD",
    invalid("the method is not a known HTTP method (methods are case-sensitive)"),
  ],
  ["HPE_INVALID_URL", invalid("the request-target is malformed")],
  [
    "HPE_INVALID_VERSION",
    invalid("the request line must end with HTTP/1.1 or HTTP/1.0 followed by CRLF"),
  ],
  ["HPE_PAUSED_H2_UPGRADE", invalid("HTTP/2 is not served on this listener")],
  // RFC 9112 §5.1, §5.2, RFC 9110 §5.5: whitespace before the colon, obs-fold, NUL, DEL, CTLs.
  [
    "HPE_INVALID_HEADER_TOKEN",
    invalid(
      "a header field has a character that is not allowed in its name or value, or is folded",
    ),
  ],
  // RFC 9112 §6.3: conflicting or malformed framing is an unrecoverable error.
  ["HPE_INVALID_CONTENT_LENGTH", CONTENT_LENGTH],
  ["HPE_UNEXPECTED_CONTENT_LENGTH", CONTENT_LENGTH],
  [
    "HPE_INVALID_TRANSFER_ENCODING",
    invalid("Transfer-Encoding must be chunked, once and last, and never with Content-Length"),
  ],
  ["HPE_INVALID_CHUNK_SIZE", invalid("a chunk size is not a hexadecimal number")],
  // RFC 9112 §2.2: a bare CR is invalid.
  ["HPE_CR_EXPECTED", LINE_ENDINGS],
  ["HPE_LF_EXPECTED", LINE_ENDINGS],
  ["HPE_STRICT", LINE_ENDINGS],
]);

/** The socket fields Node's own default answer looks at; `_httpMessage` is Node-internal. */
type ClientSocket = Duplex & { _httpMessage?: ServerResponse | null };

/** The complete HTTP/1.1 response for `answer`, as written to the socket. */
function responseBytes(answer: ClientErrorAnswer, date: Date): Buffer {
  const body = JSON.stringify({ error: answer.code, message: answer.message });
  const head =
    `HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status] ?? ""}\r\n` +
    `Date: ${date.toUTCString()}\r\n` +
    "Content-Type: application/json\r\n" +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    "Connection: close\r\n\r\n";
  return Buffer.from(head + body, "latin1");
}

/**
 * Runs `close` once the answers owed on `socket` have been written and returns true; false when
 * none are owed. Given by the connection manager, which knows a connection's requests.
 */
export type AfterPending = (socket: Duplex, close: () => void) => boolean;

/** Whether `error` closes the connection without an answer. */
function unanswered(error: Error & { code?: string }, socket: Duplex): boolean {
  // Bytes after a request that closes the connection (HTTP/1.0, `Connection: close`) are not
  // a request at all (RFC 9112 §9.6). A connection that never sent a byte is closed without an
  // answer, as nginx does: nobody reads it, and writing thousands of them at once when they time
  // out together stalls the event loop.
  return (
    error.code === "HPE_CLOSED_CONNECTION" ||
    (error.code === "ERR_HTTP_REQUEST_TIMEOUT" && (socket as Socket).bytesRead === 0)
  );
}

/**
 * A `clientError` listener: answers a parser error, a header overflow or a timeout with the JSON
 * error body, after the answers still owed to the requests before it (so every answer stays
 * its own request's), then closes the connection. It never throws: the socket is destroyed
 * whatever happens.
 */
export function createClientErrorHandler(
  now: () => number,
  afterPending: AfterPending,
): (error: Error & { code?: string }, socket: Duplex) => void {
  return function onClientError(error, socket) {
    // A reset peer reads nothing (Node's docs: check ECONNRESET and writable first).
    if (error.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer = unanswered(error, socket)
      ? undefined
      : (ANSWERS.get(error.code ?? "") ?? MALFORMED);
    const close = (): void => {
      // Writing after a response has started would corrupt it for the peer.
      const inFlight = (socket as ClientSocket)._httpMessage;
      if (answer === undefined || !socket.writable || inFlight?.headersSent === true) {
        socket.destroy();
        return;
      }
      try {
        socket.end(responseBytes(answer, new Date(now())), () => socket.destroy());
      } catch {
        socket.destroy();
      }
    };
    if (!afterPending(socket, close)) close();
  };
}
