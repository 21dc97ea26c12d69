/** Reading a token or revocation request's body within its size and time bounds. */
import type { IncomingMessage } from "node:http";
import type { Clock } from "../clock.js";

/** The body, or why there is none. */
export type Body = Buffer | "too_large" | "timeout" | "aborted";

/** Reads the body up to `limit` bytes, giving up after `timeoutMs` (one timer per read). */
export function readBody(
  req: IncomingMessage,
  limit: number,
  timeoutMs: number,
  clock: Clock,
): Promise<Body> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (result: Body): void => {
      timer.cancel();
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onAbort);
      req.off("close", onAbort);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) finish("too_large");
      else chunks.push(chunk);
    };
    const onEnd = (): void => finish(Buffer.concat(chunks, size));
    const onAbort = (): void => finish("aborted");
    const timer = clock.after(timeoutMs, () => finish("timeout"));
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onAbort);
    // A close before the end means the client went away mid-body.
    req.on("close", onAbort);
  });
}
