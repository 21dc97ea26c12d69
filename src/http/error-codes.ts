/**
 * The stable `error` codes of gatehouse's answers: one vocabulary for every error body, the
 * public listener's, the token endpoint's (RFC 6749 §5.2) and the admin API's alike.
 * docs/errors.md lists each with its status; a code never changes meaning.
 */
export const ERROR_CODES = [
  "invalid_path",
  "invalid_request",
  "unsupported_grant_type",
  "invalid_scope",
  "invalid_target",
  "unauthorized",
  "invalid_token",
  "invalid_client",
  "insufficient_scope",
  "origin_not_allowed",
  "invalid_dpop_proof",
  "use_dpop_nonce",
  "admin_token_required",
  "not_found",
  "method_not_allowed",
  "request_timeout",
  "payload_too_large",
  "uri_too_long",
  "misdirected_request",
  "rate_limited",
  "quota_exceeded",
  "request_header_fields_too_large",
  "internal_error",
  "not_implemented",
  "bad_gateway",
  "not_ready",
  "limits_unavailable",
  "temporarily_unavailable",
  "gateway_timeout",
  "http_version_not_supported",
] as const;

/** One of the stable `error` codes. */
export type ErrorCode = (typeof ERROR_CODES)[number];
