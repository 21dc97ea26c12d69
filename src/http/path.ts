/**
 * Request-target canonicalisation (RFC 3986 §6.2.2). The route table decides on the canonical path and
 * exactly that path is forwarded, so the allowlist and the upstream can never disagree.
 */

/** A request-target split into its canonical path and its raw query (without `?`). */
export interface CanonicalTarget {
  readonly path: string;
  /** The query string exactly as received, without the `?`; null when there was no `?`. */
  readonly query: string | null;
}

/** Why a request-target was refused: a stable reason shown in the 400 message. */
export type PathRejection =
  | "not_origin_form"
  | "fragment"
  | "bad_percent_encoding"
  | "encoded_slash"
  | "backslash"
  | "control_character"
  | "invalid_character"
  | "empty_segment"
  | "dot_segment";

/** Human text for each rejection reason. */
export const PATH_REJECTION_MESSAGES: Readonly<Record<PathRejection, string>> = {
  not_origin_form: "the request-target must be a path starting with /",
  fragment: "the request-target must not contain a fragment (#)",
  bad_percent_encoding: "the path has a malformed percent-encoding",
  encoded_slash: "the path must not contain an encoded slash or backslash (%2F, %5C)",
  backslash: "the path must not contain a backslash",
  control_character: "the path must not contain a NUL or control character",
  invalid_character: "the path contains a character that is not allowed in a URI path",
  empty_segment: 'the path must not contain an empty segment ("//")',
  dot_segment: 'the path must not contain "." or ".." segments',
};

// RFC 3986 §3.3: pchar = unreserved / pct-encoded / sub-delims / ":" / "@", plus "/" between segments.
const ALLOWED = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/") {
  ALLOWED[c.charCodeAt(0)] = 1;
}
// RFC 3986 §2.3: unreserved characters, the only ones decoded (§6.2.2.2).
const UNRESERVED = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") {
  UNRESERVED[c.charCodeAt(0)] = 1;
}

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 65 && code <= 70) return code - 55;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
}

const HEX = "0123456789ABCDEF";

/**
 * Canonicalises a request-target: origin-form, or absolute-form whose authority is ignored
 * (RFC 9112 §3.2.2). Unreserved percent-encodings are decoded, other encodings upper-cased.
 * Returns a PathRejection when the target is ambiguous or malformed.
 */
export function canonicalTarget(target: string): CanonicalTarget | PathRejection {
  let start = 0;
  if (target.charCodeAt(0) !== 47 /* / */) {
    const scheme = /^https?:\/\/[^/?#]*/i.exec(target);
    if (scheme === null) return "not_origin_form";
    start = scheme[0].length;
    if (start === target.length || target.charCodeAt(start) === 63 /* ? */) {
      return splitQuery("/", target, start);
    }
  }
  if (target.includes("#")) return "fragment";
  const queryAt = target.indexOf("?", start);
  const end = queryAt === -1 ? target.length : queryAt;
  let out: string | null = null; // built only when a percent-encoding changes the text
  let segmentStart = start;
  for (let i = start; i < end; i++) {
    const code = target.charCodeAt(i);
    if (code === 37 /* % */) {
      const hi = hexValue(target.charCodeAt(i + 1));
      const lo = hexValue(target.charCodeAt(i + 2));
      if (i + 2 >= end || hi < 0 || lo < 0) return "bad_percent_encoding";
      const byte = hi * 16 + lo;
      if (byte === 0x2f || byte === 0x5c) return "encoded_slash";
      if (byte < 0x20 || byte === 0x7f) return "control_character";
      out ??= target.slice(start, i);
      out +=
        byte < 128 && UNRESERVED[byte] === 1 ? String.fromCharCode(byte) : "%" + HEX[hi] + HEX[lo];
      i += 2;
      continue;
    }
    if (code === 92 /* \ */) return "backslash";
    if (code < 0x20 || code === 0x7f) return "control_character";
    if (code >= 128 || ALLOWED[code] !== 1) return "invalid_character";
    if (out !== null) out += target[i];
    if (code === 47 && i > start) {
      if (i === segmentStart + 1 && target.charCodeAt(i - 1) === 47) return "empty_segment";
      segmentStart = i;
    }
  }
  const path = out ?? target.slice(start, end);
  if (hasDotSegment(path)) return "dot_segment";
  return splitQuery(path, target, queryAt === -1 ? target.length : queryAt);
}

function splitQuery(path: string, target: string, queryAt: number): CanonicalTarget {
  return { path, query: queryAt < target.length ? target.slice(queryAt + 1) : null };
}

// A "." or ".." segment, also with matrix parameters ("..;x"), which some upstreams strip.
const DOT_SEGMENT = /\/\.\.?(?:;[^/]*)?(?:\/|$)/;

function hasDotSegment(path: string): boolean {
  return path.includes("/.") && DOT_SEGMENT.test(path);
}
