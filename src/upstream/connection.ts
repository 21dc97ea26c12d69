/**
 * One connection to the upstream, carrying one exchange at a time: it writes the request head and
 * body, parses what comes back (response-parser.ts) and tells the exchange, then goes back to its
 * pool when both the request and the response are complete and both ends keep the connection.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Socket } from "node:net";
import { answerFirst } from "./answer-first.js";
import { isFieldText, responseHeaders } from "./message-head.js";
import { createResponseParser, type ResponseParser } from "./response-parser.js";

/** What an exchange hears from its connection. Nothing comes after `complete` or `failed`. */
export interface ExchangeEvents {
  /** An interim response (1xx other than 101). */
  informational(status: number, message: string, headers: IncomingHttpHeaders): void;
  /** The final response's head; `keepAlive` is false when the upstream closes after it. */
  response(status: number, message: string, headers: IncomingHttpHeaders, keepAlive: boolean): void;
  /** A piece of the response body. */
  body(chunk: Buffer): void;
  /** The response is complete. */
  complete(): void;
  /** The exchange failed before its response was complete. */
  failed(error: Error): void;
  /** What was written of the request body has left for the upstream: more may be written. */
  drained(): void;
}

/** The pool a connection goes back to. */
export interface ConnectionOwner {
  /** The exchange is over; `reusable` says whether the connection can carry another. */
  released(connection: UpstreamConnection, reusable: boolean): void;
  /** The connection closed, busy or not. */
  closed(connection: UpstreamConnection): void;
}

/** How the request body is sent: none, as it came (`Content-Length`), or chunk by chunk. */
export type BodyFraming = "none" | "length" | "chunked";

function hangUp(): Error {
  return Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
}

function invalidReason(): Error {
  return Object.assign(new Error("the upstream's reason phrase has a character RFC 9112 forbids"), {
    code: "HPE_INVALID_STATUS",
  });
}

function unaskedUpgrade(): Error {
  return Object.assign(new Error("the upstream switched protocols unasked (101)"), {
    code: "EUNASKEDUPGRADE",
  });
}

/**
 * What a parser event threw: the events write to the client, and whatever they throw (a response
 * head Node's server refuses to write) fails the exchange instead of the process.
 */
function thrown(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

const CRLF = "\r\n";
const LAST_CHUNK = "0\r\n\r\n";

export class UpstreamConnection {
  /** Exchanges completed on this connection: more than 0 means it is a reused one. */
  uses = 0;
  /** `uses` at the idle sweep before (pool.ts). */
  sweepMark = -1;
  private exchange: ExchangeEvents | null = null;
  /** The exchange whose request body is still being written: it may outlive the response. */
  private uploader: ExchangeEvents | null = null;
  private readonly parser: ResponseParser;
  private lines: string[] = [];
  private chunked = false;
  private uploading = false;
  private skipBody = false;
  private interim = false;
  private keepAlive = false;
  /** The response is complete, and the exchange waits for its upload to end. */
  private responseDone = false;
  /** Complete, released at the end of the parse that completed it. */
  private releasing = false;
  private error: Error | undefined;

  constructor(
    readonly socket: Socket,
    private readonly owner: ConnectionOwner,
  ) {
    answerFirst(socket);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 1000);
    this.parser = createResponseParser({
      headers: (lines) => {
        for (const line of lines) this.lines.push(line);
      },
      headersComplete: (_major, _minor, lines, _method, _url, status, message, _up, keepAlive) =>
        this.headersComplete(lines ?? this.takeLines(), status, message, keepAlive),
      body: (chunk) => this.exchange?.body(chunk),
      messageComplete: () => this.messageComplete(),
    });
    socket.on("data", (data: Buffer) => this.read(data));
    socket.on("end", () => this.ended());
    socket.on("error", (error: Error) => (this.error ??= error));
    socket.on("close", () => this.closed());
    socket.on("drain", () => this.uploader?.drained());
  }

  /** Starts `exchange`: writes its request head; a body follows through `write` and `end`. */
  send(exchange: ExchangeEvents, head: string, framing: BodyFraming, headRequest: boolean): void {
    this.exchange = exchange;
    this.chunked = framing === "chunked";
    this.uploading = framing !== "none";
    this.uploader = this.uploading ? exchange : null;
    this.skipBody = headRequest;
    this.responseDone = false;
    this.socket.write(head, "latin1");
  }

  /** Writes a piece of the request body; false when the upstream should be let drain it first. */
  write(chunk: Buffer): boolean {
    const { socket } = this;
    if (!this.chunked) return socket.write(chunk);
    if (chunk.length === 0) return true;
    socket.cork();
    socket.write(`${chunk.length.toString(16)}${CRLF}`, "latin1");
    socket.write(chunk);
    const more = socket.write(CRLF, "latin1");
    socket.uncork();
    return more;
  }

  /** The request body is complete (its trailer fields, hop-by-hop, are not sent on). */
  end(): void {
    if (!this.uploading) return;
    this.uploading = false;
    this.uploader = null;
    if (this.chunked) this.socket.write(LAST_CHUNK, "latin1");
    if (this.responseDone) this.release();
  }

  /** Stops reading the response until `resume`: the client has not taken the last piece yet. */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  /** Ends the exchange without a word to it, and the connection with it. */
  abandon(error?: Error): void {
    if (error === undefined) this.exchange = null;
    this.socket.destroy(error);
  }

  private takeLines(): string[] {
    const lines = this.lines;
    this.lines = [];
    return lines;
  }

  private read(data: Buffer): void {
    if (this.exchange === null) {
      // Bytes nobody asked for: the connection no longer says where a response starts.
      this.socket.destroy();
      return;
    }
    let parsed: number | Error;
    try {
      parsed = this.parser.execute(data);
    } catch (error) {
      parsed = thrown(error);
    }
    if (parsed instanceof Error) this.socket.destroy(parsed);
    else if (this.releasing) this.release();
  }

  private headersComplete(lines: string[], status: number, message: string, keepAlive: boolean) {
    const { exchange } = this;
    if (exchange === null) {
      this.socket.destroy();
      return 1;
    }
    // gatehouse never asks to switch protocols, and after a 101 the upstream speaks another.
    if (status === 101) return this.refuse(exchange, unaskedUpgrade());
    if (!isFieldText(message)) return this.refuse(exchange, invalidReason());
    if (status < 200) {
      this.interim = true;
      exchange.informational(status, message, responseHeaders(lines));
      return 1;
    }
    this.keepAlive = keepAlive;
    exchange.response(status, message, responseHeaders(lines), keepAlive);
    return this.skipBody ? 1 : 0;
  }

  /** Ends the exchange with `error` and the connection with it; the parser skips the rest. */
  private refuse(exchange: ExchangeEvents, error: Error): 1 {
    this.exchange = null;
    this.uploader = null;
    this.socket.destroy();
    exchange.failed(error);
    return 1;
  }

  private messageComplete(): void {
    this.lines = [];
    if (this.interim) {
      this.interim = false;
      return;
    }
    const { exchange } = this;
    if (exchange === null) return;
    this.exchange = null;
    this.responseDone = true;
    exchange.complete();
    if (!this.uploading) this.releasing = true;
    // An answer that came before the whole body waits for the upload to end (full duplex), or,
    // when the upstream closes after it, ends the upload (exchange.ts) and the connection.
    else if (!this.keepAlive) this.abandon();
  }

  private release(): void {
    this.releasing = false;
    this.responseDone = false;
    this.uses += 1;
    this.owner.released(this, this.keepAlive && !this.socket.destroyed);
  }

  private ended(): void {
    // The end of a response delimited by the close, or of one cut short.
    let finished: number | Error | undefined;
    try {
      finished = this.parser.finish();
    } catch (error) {
      finished = thrown(error);
    }
    if (finished instanceof Error) this.error ??= finished;
    else if (this.releasing) this.release();
  }

  private closed(): void {
    this.parser.close();
    const { exchange } = this;
    this.exchange = null;
    exchange?.failed(this.error ?? hangUp());
    this.owner.closed(this);
  }
}
