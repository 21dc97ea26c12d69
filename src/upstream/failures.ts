/**
 * Why an upstream exchange failed, as the log line and `gatehouse_upstream_failures_total`
 * name it. undici's errors carry codes of their own (`UND_ERR_*`); the network's are Node's.
 */

/** An error of gatehouse's own about the upstream's answer, with a code to tell it by. */
export function upstreamError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

// What fails on a connection the upstream closed: a reset, writing after its close, or undici's
// "other side closed".
const CLOSED: ReadonlySet<string> = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

const CONNECT: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
]);

const TIMEOUT: ReadonlySet<string> = new Set([
  "ETIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_CONNECT_TIMEOUT",
]);

// Node's TLS errors and OpenSSL's verification results (CERT_HAS_EXPIRED,
// UNABLE_TO_VERIFY_LEAF_SIGNATURE, SELF_SIGNED_CERT_IN_CHAIN, ...).
const TLS = /^ERR_TLS|^ERR_SSL|CERT|ISSUER|SIGNATURE|HOSTNAME/;

function codeOf(error: Error): string {
  return (error as NodeJS.ErrnoException).code ?? "";
}

/** Whether `error` says only that the upstream closed the connection. */
export function closedConnection(error: Error): boolean {
  const code = codeOf(error);
  // undici says "bad response" (an unasked 100 Continue, bytes nobody asked for) with the same
  // code as a closed socket: that upstream did answer, wrongly.
  return CLOSED.has(code) && !isBadResponse(error);
}

function isBadResponse(error: Error): boolean {
  return error.message === "bad response" || error.message === "bad upgrade";
}

/**
 * The `reason` label of a failed exchange: connect (refused, no such host), closed (reset or
 * closed before the answer was complete), timeout (no head in time), body_timeout (silence after
 * the head), bad_response (not HTTP/1.1 as RFC 9112 frames it: garbage, an unasked 100 Continue
 * or 101, a status outside 100-599, too many interim responses, a 101 without the WebSocket
 * key's answer), tls (the handshake or the certificate), other.
 */
export function failureReason(error: Error): string {
  const code = codeOf(error);
  if (TIMEOUT.has(code)) return "timeout";
  if (code === "UND_ERR_BODY_TIMEOUT") return "body_timeout";
  if (CONNECT.has(code)) return "connect";
  if (
    isBadResponse(error) ||
    code.startsWith("HPE_") ||
    code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH"
  )
    return "bad_response";
  if (
    code === "EBADSTATUS" ||
    code === "EINTERIM" ||
    code === "EBADACCEPT" ||
    code === "UND_ERR_HEADERS_OVERFLOW"
  )
    return "bad_response";
  if (CLOSED.has(code) || code === "UND_ERR_CLOSED") return "closed";
  if (TLS.test(code)) return "tls";
  return "other";
}
