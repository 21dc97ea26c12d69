/**
 * The schema's checks within one section: what a value or an entry of the configuration file must
 * satisfy beyond its type (addresses, URLs, paths, route patterns, secrets, signing keys,
 * languages, the form of a plan's limits). Checks that relate different sections are in
 * cross-checks.ts.
 */
import { isIP } from "node:net";
import type { z } from "zod";
import { problem, type Ctx } from "./cross-checks.js";
import { DURATION_PATTERN, durationMs } from "./duration.js";

const LONGEST_WINDOW_MS = 366 * 86_400_000;

/** True unless `text` is a well-formed duration longer than the longest window (366 days). */
export function withinAYear(text: string): boolean {
  return !new RegExp(DURATION_PATTERN).test(text) || durationMs(text) <= LONGEST_WINDOW_MS;
}

// A used assertion's jti is held until its exp, and an assertion taken before its use works until
// then: a day bounds both, well beyond the hour authlib signs for.
const LONGEST_ASSERTION_MS = 86_400_000;

/** True unless `text` is a well-formed duration longer than an assertion may live (a day). */
export function withinADay(text: string): boolean {
  return !new RegExp(DURATION_PATTERN).test(text) || durationMs(text) <= LONGEST_ASSERTION_MS;
}

const LISTEN_PATTERN = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/;

/** True when `value` is HOST:PORT with a port from 0 to 65535. */
export function isListenAddress(value: string): boolean {
  return LISTEN_PATTERN.test(value) && Number(LISTEN_PATTERN.exec(value)?.[2]) <= 65535;
}

/** True when `value` is an IP address, or a CIDR block whose prefix fits its family. */
export function isCidr(value: string): boolean {
  const [address, bits, extra] = value.split("/");
  const family = isIP(address ?? "");
  if (family === 0 || extra !== undefined) return false;
  if (bits === undefined) return true;
  if (!/^[0-9]{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

/** `value` as a URL, or undefined after adding an issue when it is not an absolute URL. */
export function absoluteUrl(value: string, ctx: Ctx, example: string): URL | undefined {
  try {
    return new URL(value);
  } catch {
    problem(ctx, [], `must be an absolute URL, such as ${example}`);
    return undefined;
  }
}

/** Adds an issue when `url` has a query or a fragment. */
export function noQuery(url: URL, ctx: Ctx): void {
  if (url.search !== "" || url.hash !== "") {
    problem(ctx, [], "must not contain a query or a fragment");
  }
}

/**
 * An absolute http or https URL with no user info, query or fragment; `credentials` says what to
 * use instead of a user name or password.
 */
export function checkHttpUrl(value: string, ctx: Ctx, example: string, credentials = ""): void {
  const url = absoluteUrl(value, ctx, example);
  if (url === undefined) return;
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    problem(ctx, [], `must use http or https, not ${url.protocol.slice(0, -1)}`);
  }
  if (url.username !== "" || url.password !== "") {
    problem(ctx, [], `must not contain a user name or password${credentials}`);
  }
  noQuery(url, ctx);
}

/** The upstream URL: absolute, http or https, with no user info, query or fragment. */
export function checkUpstreamUrl(value: string, ctx: Ctx): void {
  checkHttpUrl(value, ctx, "http://127.0.0.1:3000");
}

/** Why a literal path (no wildcards) is unusable, or undefined when it is fine. */
function literalPathProblem(path: string): string | undefined {
  if (!path.startsWith("/")) return 'must start with "/"';
  const segments = path.slice(1).split("/");
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i] as string;
    if (segment === "" && i < segments.length - 1)
      return 'must not contain an empty segment ("//")';
    if (segment === "." || segment === "..") return 'must not contain "." or ".." segments';
    if (!/^([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*$/.test(segment)) {
      return `has a character that is not allowed in a path segment: ${JSON.stringify(segment)}`;
    }
    if (/%(2f|5c|00)/i.test(segment)) return "must not contain %2F, %5C or %00";
    if (segment.includes(";")) return 'must not contain ";" (matrix parameters)';
  }
  return undefined;
}

/** One of gatehouse's own paths (the token endpoint, the health checks): a literal path. */
export function checkOwnPath(value: string, ctx: Ctx): void {
  const reason = literalPathProblem(value);
  if (reason !== undefined) problem(ctx, [], reason);
}

/** A route pattern: a literal path whose `*` and `**` are whole segments, `**` only last. */
export function checkRoutePattern(pattern: string, ctx: Ctx): void {
  const segments = pattern.startsWith("/") ? pattern.slice(1).split("/") : [];
  const reason = literalPathProblem(pattern.replace(/\/\*\*?(?=\/|$)/g, "/x"));
  if (reason !== undefined) {
    problem(ctx, [], reason);
  } else if (segments.some((s) => s.includes("*") && s !== "*" && s !== "**")) {
    problem(ctx, [], '"*" and "**" must be whole path segments, such as /v1/items/*');
  } else if (segments.slice(0, -1).includes("**")) {
    problem(ctx, [], '"**" may only be the last segment, such as /v1/reports/**');
  }
}

/** A route lists each method once. */
export function checkMethodsOnce(route: { methods: readonly string[] }, ctx: Ctx): void {
  const seen = new Set<string>();
  route.methods.forEach((method, m) => {
    if (seen.has(method)) problem(ctx, ["methods", m], "is listed twice");
    seen.add(method);
  });
}

/** A client has exactly one credential: secret_hash, secret_env or jwks_file. */
export function checkClientSecret(
  client: {
    secret_hash?: string;
    secret_env?: string;
    jwks_file?: string;
    issuer?: string;
    dpop: string;
  },
  ctx: Ctx,
): void {
  const secrets =
    Number(client.secret_hash !== undefined) + Number(client.secret_env !== undefined);
  const keys = client.jwks_file !== undefined;
  // A provider's client authenticates to the provider, never to gatehouse.
  if (client.issuer !== undefined) {
    if (secrets > 0 || keys) {
      problem(
        ctx,
        ["issuer"],
        "is for a client that authenticates to that provider: remove secret_hash, secret_env and jwks_file",
      );
    }
    // Whether its tokens are bound is the provider's to decide; a route's `dpop` says what passes.
    if (client.dpop === "required") {
      problem(ctx, ["dpop"], "is for a client gatehouse issues tokens to; use the route's dpop");
    }
    return;
  }
  if (secrets === 0 && !keys) {
    problem(
      ctx,
      [],
      "needs secret_hash (from gatehouse hash-secret), secret_env or jwks_file, or issuer for a provider's client",
    );
  }
  if (secrets === 2) problem(ctx, [], "must have either secret_hash or secret_env, not both");
  // RFC 7523 §2.2 and RFC 6749 §2.3: one method per client, so a leaked secret cannot stand in
  // for the key the client was moved to.
  if (secrets > 0 && keys) {
    problem(ctx, ["jwks_file"], "is for a client without a secret: remove secret_hash/secret_env");
  }
}

interface TokensShape {
  signing: { algorithm: string; key_file?: string | undefined; secret_env?: string | undefined };
  previous_keys: readonly string[];
}

/** The keys suit the algorithm: secret_env for HS256; key_file and previous_keys for the others. */
export function checkTokens(tokens: TokensShape, ctx: Ctx): void {
  const { signing } = tokens;
  if (signing.algorithm === "HS256") {
    if (signing.key_file !== undefined) {
      problem(ctx, ["signing", "key_file"], "is for EdDSA and ES256; HS256 uses secret_env");
    }
    if (tokens.previous_keys.length > 0) {
      problem(ctx, ["previous_keys"], "are public keys for EdDSA and ES256, not HS256");
    }
  } else if (signing.secret_env !== undefined) {
    problem(
      ctx,
      ["signing", "secret_env"],
      `is for HS256; ${signing.algorithm} uses key_file (a PKCS#8 PEM from gatehouse keygen)`,
    );
  }
}

interface LanguagesShape {
  supported: readonly string[];
  default: string;
}

/** The default language is supported, and no language is listed twice. */
export function checkLanguages(languages: LanguagesShape, ctx: Ctx): void {
  const { supported } = languages;
  if (!supported.includes(languages.default)) {
    problem(ctx, ["default"], `must be one of the supported languages (${supported.join(", ")})`);
  }
  const seen = new Set<string>();
  supported.forEach((code, index) => {
    if (seen.has(code)) problem(ctx, ["supported", index], "is listed twice");
    seen.add(code);
  });
}

/** A plan or a client override has the one-limit form or the named form, not both. */
export function oneRateForm(
  limits: { rate_limit?: unknown; rate_limits?: unknown },
  ctx: z.RefinementCtx,
): void {
  if (limits.rate_limit !== undefined && limits.rate_limits !== undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["rate_limits"],
      message: "has both rate_limit and rate_limits; keep one",
    });
  }
}

/** RFC 6749 §3.3 scope-token: printable ASCII but space, `"` and `\`. */
export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/** RFC 8707 §2: an absolute URI (RFC 3986 §4.3, a scheme first) without a fragment. */
export function isResourceUri(value: string): boolean {
  return /^[A-Za-z][A-Za-z0-9+.-]*:[^#\s]+$/.test(value) && URL.canParse(value);
}

/** A list names each entry once. */
export function checkListedOnce(list: readonly string[], ctx: Ctx): void {
  const seen = new Set<string>();
  list.forEach((entry, index) => {
    if (seen.has(entry)) problem(ctx, [index], "is listed twice");
    seen.add(entry);
  });
}

/** A route needs all of `scopes` or one of `scopes_any`, not both, and only with a token. */
export function checkRouteScopes(
  route: { auth: string; scopes?: readonly string[]; scopes_any?: readonly string[]; dpop: string },
  ctx: Ctx,
): void {
  if (route.dpop === "required" && route.auth !== "bearer") {
    problem(ctx, ["dpop"], "needs auth: bearer; an anonymous request has no token to bind");
  }
  if (route.scopes !== undefined && route.scopes_any !== undefined) {
    problem(ctx, ["scopes_any"], "cannot be combined with scopes; keep one");
  }
  const key = route.scopes !== undefined ? "scopes" : "scopes_any";
  if (route[key] !== undefined && route.auth !== "bearer") {
    problem(ctx, [key], "needs auth: bearer; an anonymous request has no scopes");
  }
}

/** A WebSocket route takes the handshake, which RFC 6455 §4.1 makes a GET. */
export function checkWebSocketRoute(
  route: { methods: readonly string[]; websocket: boolean },
  ctx: Ctx,
): void {
  if (route.websocket && !route.methods.includes("GET")) {
    problem(ctx, ["methods"], "must list GET on a websocket route: the handshake is a GET");
  }
}
