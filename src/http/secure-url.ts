/**
 * Where gatehouse may fetch or publish an authority's URL: https, or http on a loopback host,
 * where no one else on the network can answer for it.
 */

/** True for `localhost`, 127.0.0.0/8 and [::1]. */
export function isLoopbackHost(hostname: string): boolean {
  return (
    hostname === "localhost" ||
    hostname === "[::1]" ||
    /^127\.[0-9]+\.[0-9]+\.[0-9]+$/.test(hostname)
  );
}

/**
 * `text` as a URL when it is https (or http on a loopback host), without userinfo, query or
 * fragment (RFC 8414 §2 for an issuer); otherwise undefined.
 */
export function secureUrl(text: string): URL | undefined {
  if (!URL.canParse(text) || /[?#]/.test(text)) return undefined;
  const url = new URL(text);
  if (url.username !== "" || url.password !== "") return undefined;
  if (url.protocol === "https:") return url;
  return url.protocol === "http:" && isLoopbackHost(url.hostname) ? url : undefined;
}
