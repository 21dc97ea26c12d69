import type { IncomingMessage } from "node:http";
import { errorReply, type Stage } from "../core/context.js";
import { fieldLines } from "../http/field-lines.js";
import { transferCodings } from "../http/transfer-coding.js";
import { sendsBody } from "../upstream/forwarder.js";

/** Longest request-target accepted; longer ones get 414 (RFC 9112 §3). */
export const MAX_TARGET_LENGTH = 8192;
/** Most header fields accepted; more get 431 rather than Node's silent truncation. */
export const MAX_HEADER_FIELDS = 200;

const BAD_HOST = errorReply(
  400,
  "invalid_request",
  "the request must carry exactly one Host header: a host name or address and an optional port",
);

// Refusals of a body gatehouse cannot frame: the connection cannot be read on (RFC 9112 §6.3).
const CHUNKED_ONLY = errorReply(
  501,
  "not_implemented",
  "the only Transfer-Encoding accepted is chunked",
  { connection: "close" },
);
const BAD_TRANSFER_ENCODING = errorReply(
  400,
  "invalid_request",
  "Transfer-Encoding must name chunked once, last, as a list of valid transfer codings",
  { connection: "close" },
);

// RFC 9112 §3.2 and RFC 3986 §3.2.2: Host = uri-host [ ":" port ], where uri-host is an IP-literal
// or a reg-name (no userinfo, no spaces, no path).
const VALID_HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]*)(?::[0-9]*)?$/;

// RFC 6455 §4.1: a handshake is a GET, which has no body; what follows its head would be relayed
// to the upstream as the client's first frames.
const HANDSHAKE_WITH_BODY = errorReply(
  400,
  "invalid_request",
  "a WebSocket handshake has no body: no Content-Length above 0, no Transfer-Encoding",
);

const BAD_TARGET_HOST = errorReply(
  400,
  "invalid_request",
  "an absolute request-target must name a host and an optional port, without userinfo",
);

const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)/i;

/**
 * RFC 9112 §3.2.2: the authority of an absolute-form target replaces Host, so what the upstream
 * receives as X-Forwarded-Host is the target's. False when that authority is not a valid Host.
 */
function authorityReplacesHost(req: IncomingMessage): boolean {
  const absolute = ABSOLUTE_FORM.exec(req.url ?? "");
  if (absolute === null) return true;
  const authority = absolute[1] as string;
  if (authority === "" || authority.startsWith(":") || !VALID_HOST.test(authority)) return false;
  req.headers.host = authority;
  return true;
}

/**
 * Framing checks that Node's parser leaves to the application, before anything else reads the
 * request: two Host lines are refused before anything else, and so is a WebSocket handshake with
 * a body.
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
    const codings = req.headers["transfer-encoding"];
    if (codings !== undefined) {
      const read = transferCodings(codings);
      if (read !== "chunked") return read === "invalid" ? BAD_TRANSFER_ENCODING : CHUNKED_ONLY;
    }
    if (ctx.upgrade !== undefined && sendsBody(req.headers)) return HANDSHAKE_WITH_BODY;
    if (!authorityReplacesHost(req)) return BAD_TARGET_HOST;
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
