/** Errors with a stable code and an HTTP status; nobody branches on message text. */
import type { ErrorCode } from "./error-codes.js";

/** A failure that maps to one HTTP answer. `code` never changes meaning between versions. */
export class GatehouseError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = "GatehouseError";
  }
}
