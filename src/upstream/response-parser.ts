/**
 * Node's HTTP/1.1 parser (llhttp), the one its own HTTP client reads responses with, reached
 * through `node:_http_common`: the upstream's answers are parsed exactly as strictly as Node's
 * client parsed them (framing, duplicate `Content-Length`, obsolete line folding, header size),
 * without the request and response streams that client builds around every exchange.
 *
 * The module is not in Node's documentation; this is the one place gatehouse uses it. The shape
 * relied on is checked when this module loads, so a Node release that changes it fails at start
 * with this file's name, and test/upstream-parser.test.ts says so on every Node the suite runs.
 */
import { createRequire } from "node:module";

/** What the parser reports. */
export interface ParserEvents {
  /** Header (or trailer) lines beyond what fits in one call, as name, value, name, value. */
  headers(lines: string[]): void;
  /**
   * The head is complete: `lines` is undefined when they came through `headers`. Returns 1 when
   * the message has no body whatever its fields say (the answer to a HEAD, an interim 1xx).
   */
  headersComplete(
    major: number,
    minor: number,
    lines: string[] | undefined,
    method: undefined,
    url: undefined,
    status: number,
    message: string,
    upgrade: boolean,
    keepAlive: boolean,
  ): 0 | 1;
  body(chunk: Buffer): void;
  messageComplete(): void;
}

/** One response parser; reused for every response on its connection. */
export interface ResponseParser {
  /** Parses `data`: the bytes consumed, or the parse error (with an `HPE_*` code). */
  execute(data: Buffer): number | Error;
  /** The connection ended: completes a body delimited by the close, or the error of a cut one. */
  finish(): number | Error | undefined;
  /** Frees the native parser; it is not used again. */
  close(): void;
}

interface NativeParser extends ResponseParser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  [event: number]: unknown;
}

interface NativeParserClass {
  new (): NativeParser;
  readonly RESPONSE: number;
  readonly kLenientNone: number;
  readonly kOnHeaders: number;
  readonly kOnHeadersComplete: number;
  readonly kOnBody: number;
  readonly kOnMessageComplete: number;
}

const NUMBERS = [
  "RESPONSE",
  "kLenientNone",
  "kOnHeaders",
  "kOnHeadersComplete",
  "kOnBody",
  "kOnMessageComplete",
] as const;
const METHODS = ["initialize", "execute", "finish", "close"] as const;

/** Node's parser class, after checking it has every member used here. */
export function nodeParserClass(module: unknown): NativeParserClass {
  const parser = (module as { HTTPParser?: NativeParserClass } | undefined)?.HTTPParser;
  const missing = [
    ...(typeof parser === "function" ? [] : ["HTTPParser"]),
    ...NUMBERS.filter((name) => typeof parser?.[name] !== "number"),
    ...METHODS.filter((name) => typeof parser?.prototype[name] !== "function"),
  ];
  if (missing.length > 0) {
    throw new Error(
      `node:_http_common lacks ${missing.join(", ")} on Node ${process.version}: ` +
        "see src/upstream/response-parser.ts",
    );
  }
  return parser as NativeParserClass;
}

const HTTPParser = nodeParserClass(createRequire(import.meta.url)("node:_http_common"));

/** A response parser reporting to `events`. */
export function createResponseParser(events: ParserEvents): ResponseParser {
  const parser = new HTTPParser();
  parser[HTTPParser.kOnHeaders] = events.headers;
  parser[HTTPParser.kOnHeadersComplete] = events.headersComplete;
  parser[HTTPParser.kOnBody] = events.body;
  parser[HTTPParser.kOnMessageComplete] = events.messageComplete;
  // 0: the default header size limit (--max-http-header-size, 16 KiB), as Node's client uses.
  parser.initialize(HTTPParser.RESPONSE, {}, 0, HTTPParser.kLenientNone);
  return parser;
}
