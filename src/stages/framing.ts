import { errorReply, type Stage } from "../pipeline/context.js";
import { fieldLines } from "../http/field-lines.js";

/** Longest request-target accepted; longer ones get 414 (RFC 9112 §3). */
export const MAX_TARGET_LENGTH = 8192;
/** Most header fields accepted; more get 431 rather than Node's silent truncation. */
export const MAX_HEADER_FIELDS = 200;

const BAD_HOST = errorReply(
  400,
  "invalid_request",
  "the request must carry exactly one Host header: a host name or address and an optional port",
);

// RFC 9112 §3.2 and RFC 3986 §3.2.2: Host = uri-host [ ":" port ], where uri-host is an IP-literal
// or a reg-name (no userinfo, no spaces, no path).
const VALID_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;

/**
 * Framing checks that Node's parser leaves to the application, before anything else reads the
 * request (SPEC §6: two Host lines first of all).
 */
export function createFramingStage(): Stage {
  return function framing(ctx) {
    const { req } = ctx;
    if (req.httpVersionMajor !== 1) {
      return errorReply(
        505,
        "http_version_not_supported",
        "only HTTP/1.0 and HTTP/1.1 are served here",
      );
    }
    const raw = req.rawHeaders;
    if (raw.length > MAX_HEADER_FIELDS * 2) {
      return errorReply(
        431,
        "request_header_fields_too_large",
        `at most ${MAX_HEADER_FIELDS} header fields are accepted`,
      );
    }
    // RFC 9112 §3.2: an HTTP/1.1 request without Host, or with more than one Host field line, or
    // an invalid one, gets 400 (Node's own check is off so that this answer has a JSON body).
    const host = req.headers.host;
    if (
      host === undefined
        ? req.httpVersionMinor !== 0
        : fieldLines(raw, "host") > 1 || !VALID_HOST.test(host)
    ) {
      return BAD_HOST;
    }
    // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means the framing is faulty.
    if (req.httpVersionMinor === 0 && req.headers["transfer-encoding"] !== undefined) {
      return errorReply(
        400,
        "invalid_request",
        "HTTP/1.0 requests must not use Transfer-Encoding",
        {
          connection: "close",
        },
      );
    }
    if ((req.url ?? "").length > MAX_TARGET_LENGTH) {
      return errorReply(
        414,
        "uri_too_long",
        `the request-target must be at most ${MAX_TARGET_LENGTH} bytes`,
      );
    }
    return undefined;
  };
}
