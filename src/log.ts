/** The process logger: pino JSON lines, with every credential-bearing field redacted. */
import { writeSync } from "node:fs";
import { pino, type Logger, type DestinationStream } from "pino";
import { systemClock, type Clock } from "./clock.js";

/** Paths that could carry secrets; they never reach a log line. */
export const REDACTED_PATHS = [
  "req.headers.authorization",
  "req.headers.cookie",
  "req.headers['proxy-authorization']",
  "headers.authorization",
  "authorization",
  "client_secret",
  "access_token",
  "token",
  "secret",
  "*.client_secret",
  "*.access_token",
  "*.token",
  "*.secret",
];

const CENSOR = "[redacted]";

// ISO-8601 time, as `new Date().toISOString()` writes it: formatting a Date for every line cost
// more than the rest of the line. The text is kept for the current millisecond (a busy proxy
// logs several lines in one), and its date and time up to the second for the current second.
let lastMs = -1;
let lastTime = "";
let second = -1;
let secondPrefix = "";
function isoTime(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    const ms = now % 1000;
    if (now - ms !== second) {
      second = now - ms;
      secondPrefix = `,"time":"${new Date(second).toISOString().slice(0, 20)}`;
    }
    lastTime = `${secondPrefix}${ms < 10 ? "00" : ms < 100 ? "0" : ""}${ms}Z"`;
  }
  return lastTime;
}

/** How long an access-log line may wait in the buffer before it is written. */
export const LOG_FLUSH_MS = 1000;
/** Buffered access lines are written once they fill this many bytes. */
export const LOG_BUFFER_BYTES = 16384;
// Room above the threshold for the line that crosses it: a line that surely fits is copied into
// the buffer; a longer one (a request-target near its 8 KiB limit) is written on its own.
const LOG_LINE_ROOM = 16384;
// The most UTF-8 bytes one UTF-16 code unit can take.
const UTF8_PER_UNIT = 3;

// pino's err serializer takes any object with a message for an error and logs it as type
// "Object" with an empty stack. An Error keeps pino's form (type, message, and Node's code,
// syscall, address); a plain object, whose fields were picked because the error carries a secret,
// is logged as given. A warning or an error is read by an operator, for whom the message and the
// code say what happened and a stack trace buries them: the stack (its causes' included) is kept
// only when the logger is at debug or trace, for whoever debugs gatehouse. A system error
// (ECONNREFUSED) never keeps it: it lists only Node's own frames, and an unreachable upstream
// logs one line per request.
function errorFields(err: unknown, withStack: boolean): unknown {
  if (!(err instanceof Error)) return err;
  const fields = pino.stdSerializers.err(err) as Fields;
  return withStack && (err as NodeJS.ErrnoException).syscall === undefined
    ? fields
    : withoutStacks(fields);
}

type Fields = Record<string, unknown>;

// pino's form of an error: the serializer keeps an error held in a field (and each of an
// AggregateError's errors) as an error of its own, stack included.
function isSerialized(value: unknown): value is Fields {
  return typeof value === "object" && value !== null && "type" in value && "stack" in value;
}

// A serialized error without its stack, nor the stacks of the errors it holds.
function withoutStacks(fields: Fields): Fields {
  const rest = { ...fields };
  delete rest.stack;
  for (const [key, value] of Object.entries(rest)) {
    if (isSerialized(value)) rest[key] = withoutStacks(value);
    else if (Array.isArray(value)) {
      rest[key] = value.map((item) => (isSerialized(item) ? withoutStacks(item) : item));
    }
  }
  return rest;
}

const OPTIONS = {
  base: { service: "gatehouse" },
  timestamp: isoTime,
  // The level as a word ("warn"), which a reader or a log pipeline understands without pino's table.
  formatters: { level: (label: string) => ({ level: label }) },
} as const;

/**
 * A file descriptor (standard output) as the loggers see it: access lines are encoded into a
 * buffer as they come and written 16 KiB at a time, and at least every second (nginx's
 * `access_log ... buffer= flush=`); one write per access line would be the largest cost of a
 * forwarded request after the forwarding itself. The buffer lives outside the JavaScript heap, so
 * the waiting lines are not copied by every young-generation collection, as a string of them was.
 * Every other line (reloads, warnings, shutdown) is rare and is written at once, after the access
 * lines that wait before it, so the output keeps its order. Writes are synchronous, so a slow
 * reader slows the proxy down instead of growing a buffer without bound, and a flush at exit
 * loses nothing. An output that fails for good (closed, gone) loses lines, never the process.
 */
export class BufferedLines implements DestinationStream {
  private readonly bytes = Buffer.allocUnsafeSlow(LOG_BUFFER_BYTES + LOG_LINE_ROOM);
  private used = 0;

  constructor(
    private readonly fd: number,
    clock: Clock = systemClock,
  ) {
    clock.every(LOG_FLUSH_MS, () => this.flush());
  }

  /** Queues an access line. */
  buffer(line: string): void {
    if (line.length * UTF8_PER_UNIT > LOG_LINE_ROOM) {
      this.write(line);
      return;
    }
    this.used += this.bytes.write(line, this.used);
    if (this.used >= LOG_BUFFER_BYTES) this.flush();
  }

  /** Writes `line` at once, after the queued lines. */
  write(line: string): void {
    this.flush();
    const bytes = Buffer.from(line);
    writeFully(this.fd, bytes, bytes.length);
  }

  /** Writes the queued lines; pino's `flush(cb)` lands here. */
  flush(done?: (error?: Error) => void): void {
    if (this.used > 0) {
      const used = this.used;
      this.used = 0;
      writeFully(this.fd, this.bytes, used);
    }
    done?.();
  }
}

const pause = new Int32Array(new SharedArrayBuffer(4));

// Writes the first `length` bytes of `bytes`.
function writeFully(fd: number, bytes: Buffer, length: number): void {
  let offset = 0;
  while (offset < length) {
    try {
      offset += writeSync(fd, bytes, offset, length - offset);
    } catch (error) {
      // A non-blocking output that is full: wait for the reader, as a blocking write would.
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") return;
      Atomics.wait(pause, 0, 0, 1);
    }
  }
}

/**
 * Creates the process logger at `level`, writing to `destination` (standard output, buffered as
 * BufferedLines says, by default).
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const stream = destination ?? new BufferedLines(1);
  // The level a reload sets is the one asked when a line is written.
  const serializers = { err: (err: unknown) => errorFields(err, log.isLevelEnabled("debug")) };
  const log: Logger = pino(
    { ...OPTIONS, serializers, level, redact: { paths: REDACTED_PATHS, censor: CENSOR } },
    stream,
  );
  return log;
}

/**
 * A warning logged the first time only: a reload that keeps a setting worth a warning does not
 * repeat it, so the log of a long-running process is not a list of the same line.
 */
export function createWarnOnce(log: Logger): (message: string, fields?: object) => void {
  const said = new Set<string>();
  return (message, fields = {}) => {
    if (said.has(message)) return;
    said.add(message);
    log.warn(fields, message);
  };
}

/** One access-log line's fields; undefined ones are left out, as pino leaves them out. */
export interface AccessFields {
  readonly requestId: string;
  /** W3C Trace Context ids, 32 and 16 hex digits. */
  readonly traceId: string;
  readonly spanId: string;
  readonly method: string | undefined;
  readonly path: string;
  readonly route: string;
  readonly status: number;
  readonly durationMs: number;
  readonly upstreamMs: number | undefined;
  readonly clientId: string | undefined;
  /** The bearer token's issuer name (`own` for gatehouse's). */
  readonly issuer: string | undefined;
  readonly decision: string;
  /** Why a bearer token was refused: `bearer_<rule>`. */
  readonly reason: string | undefined;
  /** A WebSocket connection, written once it ended: its bytes, who closed it and why. */
  readonly websocket:
    | {
        readonly bytesIn: number;
        readonly bytesOut: number;
        readonly closedBy: string;
        readonly reason: string;
      }
    | undefined;
}

/** Writes one line per request, in the format of the process logger's lines. */
export interface AccessLog {
  write(fields: AccessFields): void;
}

// Characters that JSON must escape; values without them are written between quotes as they are.
// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u2028\u2029]/;

function quoted(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
}

// Milliseconds with two decimals from integer arithmetic: a double's shortest decimal form
// measured three times slower.
function hundredths(ms: number): string {
  const h = Math.round(ms * 100);
  const whole = Math.trunc(h / 100);
  const rest = h - whole * 100;
  return `${whole}.${rest < 10 ? "0" : ""}${rest}`;
}

/**
 * The access log: pino's line format (level, time, service, the fields, msg) on the process
 * logger's stream and at its level, formatted here rather than by pino. The fields are always the
 * same flat strings and numbers, so they need neither pino's generic serialiser nor its redaction
 * (no header, query or body is ever logged); measured, that halves a forwarded request's logging
 * cost.
 */
export function createAccessLog(log: Logger): AccessLog {
  const stream = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
  const put =
    stream instanceof BufferedLines
      ? (line: string) => stream.buffer(line)
      : (line: string) => stream.write(line);
  const info = log.levels.values.info as number;
  return {
    write(f) {
      if (log.levelVal > info) return;
      let line = `{"level":"info"${isoTime()},"service":"gatehouse","requestId":${quoted(f.requestId)}`;
      // Hex digits only (the trace-context stage makes or checks them): nothing to escape.
      line += `,"traceId":"${f.traceId}","spanId":"${f.spanId}"`;
      if (f.method !== undefined) line += `,"method":${quoted(f.method)}`;
      line += `,"path":${quoted(f.path)},"route":${quoted(f.route)},"status":${f.status}`;
      line += `,"durationMs":${hundredths(f.durationMs)}`;
      if (f.upstreamMs !== undefined) line += `,"upstreamMs":${hundredths(f.upstreamMs)}`;
      if (f.clientId !== undefined) line += `,"clientId":${quoted(f.clientId)}`;
      if (f.issuer !== undefined) line += `,"issuer":${quoted(f.issuer)}`;
      const reason = f.reason === undefined ? "" : `,"reason":${quoted(f.reason)}`;
      const ws = f.websocket;
      if (ws !== undefined) {
        line += `,"bytesIn":${ws.bytesIn},"bytesOut":${ws.bytesOut}`;
        line += `,"closedBy":"${ws.closedBy}","closeReason":"${ws.reason}"`;
      }
      put(`${line},"decision":${quoted(f.decision)}${reason},"msg":"request"}\n`);
    },
  };
}
