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

/**
 * Creates a logger at `level` writing to `destination` (stdout by default). Each line is written
 * at once with one synchronous write: measured under load, that costs less CPU per line than
 * asynchronous writes, whose thread-pool round trip is paid about once per line unless lines are
 * held back; and a slow reader slows the proxy down instead of growing an unbounded buffer.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const stream = destination ?? pino.destination({ dest: 1, sync: true });
  return pino(
    {
      level,
      base: { service: "gatehouse" },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: CENSOR },
    },
    stream,
  );
}

/**
 * The logger for access-log lines: the same stream and level, redacting every named path but not
 * the `*.` wildcards. A wildcard path runs the redactor over the value of every field of every
 * line, the largest cost of a forwarded request; an access-log line is a fixed set of flat fields
 * (no headers, query or body), so no nested object can carry a secret.
 */
export function accessLogger(log: Logger): Logger {
  return log.child(
    {},
    { redact: { paths: REDACTED_PATHS.filter((path) => !path.startsWith("*.")), censor: CENSOR } },
  );
}
