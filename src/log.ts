/** The process logger: pino JSON lines, with every credential-bearing field redacted. */
import { pino, type Logger, type DestinationStream } from "pino";

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

// One ISO-8601 string per millisecond: a busy proxy logs several lines in the same millisecond,
// and formatting a Date is the largest part of a line's cost after the fields themselves.
let lastMs = -1;
let lastTime = "";
function isoTime(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastTime = `,"time":"${new Date(now).toISOString()}"`;
  }
  return lastTime;
}

/** How long an access-log line may wait in the buffer before it is written. */
export const LOG_FLUSH_MS = 1000;

const OPTIONS = { base: { service: "gatehouse" }, timestamp: isoTime } as const;

/**
 * Creates the process logger at `level`, writing to `destination` (stdout by default). The
 * stream collects lines and writes them 4 KiB at a time, and at least every second (nginx's
 * `access_log ... buffer= flush=`): one write per access-log line would be the largest cost of a
 * forwarded request after the forwarding itself. Lines of this logger are rare events (reloads,
 * warnings, shutdown) and are written at once, with whatever access lines wait before them.
 * Writes are synchronous, so a slow reader slows the proxy down instead of growing a buffer
 * without bound, and a flush at exit loses nothing.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const stream =
    destination ??
    pino.destination({ dest: 1, sync: true, minLength: 4096, periodicFlush: LOG_FLUSH_MS });
  return pino(
    {
      ...OPTIONS,
      level,
      redact: { paths: REDACTED_PATHS, censor: CENSOR },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args);
          this.flush();
        },
      },
    },
    stream,
  );
}

/** One access-log line's fields; undefined ones are left out, as pino leaves them out. */
export interface AccessFields {
  readonly requestId: string;
  readonly method: string | undefined;
  readonly path: string;
  readonly route: string;
  readonly status: number;
  readonly durationMs: number;
  readonly upstreamMs: number | undefined;
  readonly clientId: string | undefined;
  readonly decision: string;
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

/**
 * The access log: pino's line format (level, time, service, the fields, msg) on the process
 * logger's stream and at its level, formatted here rather than by pino. The fields are always the
 * same flat strings and numbers, so they need neither pino's generic serialiser nor its redaction
 * (no header, query or body is ever logged); measured, that halves a forwarded request's logging
 * cost.
 */
export function createAccessLog(log: Logger): AccessLog {
  const stream = (log as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
  const info = log.levels.values.info as number;
  return {
    write(f) {
      if (log.levelVal > info) return;
      let line = `{"level":${info}${isoTime()},"service":"gatehouse","requestId":${quoted(f.requestId)}`;
      if (f.method !== undefined) line += `,"method":${quoted(f.method)}`;
      line += `,"path":${quoted(f.path)},"route":${quoted(f.route)},"status":${f.status}`;
      line += `,"durationMs":${f.durationMs}`;
      if (f.upstreamMs !== undefined) line += `,"upstreamMs":${f.upstreamMs}`;
      if (f.clientId !== undefined) line += `,"clientId":${quoted(f.clientId)}`;
      stream.write(`${line},"decision":${quoted(f.decision)},"msg":"request"}\n`);
    },
  };
}
