/**
 * The one place gatehouse reaches into http-proxy-3 past its public API. Its `deleteLength` web
 * pass rewrites a DELETE or OPTIONS body sent chunked into `Content-Length: 0`; framing is the
 * client's and must stay as it came, and no option turns the pass off. The pass list is private
 * in the typings, so this fails loudly, at start, when an upgrade renames or removes it, and
 * test/http-proxy-internals.test.ts says so before any release does.
 */
import type { ProxyServer } from "http-proxy-3";

const PASS = "deleteLength";

/** Takes http-proxy's `deleteLength` pass out of `server`'s web passes. */
export function keepRequestFraming(server: ProxyServer): void {
  const internals = server as unknown as { webPasses?: Array<{ name: string }> };
  const passes = internals.webPasses;
  if (!Array.isArray(passes) || !passes.some((pass) => pass.name === PASS)) {
    throw new Error(
      `http-proxy-3 has no "${PASS}" web pass any more: see src/upstream/http-proxy-internals.ts`,
    );
  }
  internals.webPasses = passes.filter((pass) => pass.name !== PASS);
}
