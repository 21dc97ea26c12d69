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

/**
 * Creates a logger at `level` writing to `destination` (stdout by default). Asynchronous writes
 * coalesce lines while a write is in flight, so a busy proxy makes few syscalls and a quiet one
 * still logs at once.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const stream = destination ?? pino.destination({ dest: 1, sync: false });
  return pino(
    {
      level,
      base: { service: "gatehouse" },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
    },
    stream,
  );
}
