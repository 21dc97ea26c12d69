/** Reading a request's Transfer-Encoding list (RFC 9112 §6.1, RFC 9110 §5.6.1). */

/** What a Transfer-Encoding value means for gatehouse. */
export type TransferCodings = "chunked" | "unsupported" | "invalid";

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
// transfer-coding = token *( OWS ";" OWS token BWS "=" BWS ( token / quoted-string ) )
const CODING = new RegExp(
  `^(${TOKEN})(?:[ \\t]*;[ \\t]*${TOKEN}[ \\t]*=[ \\t]*(?:${TOKEN}|"(?:[^"\\\\]|\\\\.)*"))*$`,
);

/**
 * Classifies the request's Transfer-Encoding (every field line, joined with commas): `chunked`
 * when it is exactly one final `chunked` (empty list elements are ignored, names are
 * case-insensitive); `unsupported` when it is well-formed, ends in one `chunked` and names another
 * coding, which gatehouse does not implement (501, RFC 9112 §6.1); `invalid` otherwise (400,
 * RFC 9112 §6.3: without a final `chunked` the message cannot be framed).
 */
export function transferCodings(value: string): TransferCodings {
  const names: string[] = [];
  for (const element of value.split(",")) {
    const trimmed = element.trim();
    if (trimmed === "") continue;
    const match = CODING.exec(trimmed);
    if (match === null) return "invalid";
    names.push((match[1] as string).toLowerCase());
  }
  const chunked = names.filter((name) => name === "chunked").length;
  if (chunked !== 1 || names[names.length - 1] !== "chunked") return "invalid";
  return names.length === 1 ? "chunked" : "unsupported";
}
