/**
 * A name or value of application/x-www-form-urlencoded (a query, a token request's body): `+` is a
 * space and percent-escapes are UTF-8 (RFC 6749 Appendix B, the URL Standard). Decoded exactly
 * once (RFC 3986 §2.4): `%252C` is `%2C`, not a comma. Undefined when an escape is malformed or
 * not UTF-8.
 */
export function formDecode(text: string): string | undefined {
  if (!text.includes("%") && !text.includes("+")) return text;
  try {
    return decodeURIComponent(text.replaceAll("+", " "));
  } catch {
    return undefined;
  }
}
