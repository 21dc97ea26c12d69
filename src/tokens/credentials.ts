/**
 * A request's access token, read from where its route allows: the Authorization header (RFC 6750
 * §2.1, or the DPoP scheme of RFC 9449 §7.1), the `access_token` query parameter (RFC 6750 §2.3),
 * a `bearer.<token>` WebSocket subprotocol, or a cookie. Whatever carried the token is taken out
 * of what the upstream receives: the parameter from `ctx.query`, the protocol entry or the cookie
 * through `ctx.tokenCarrier`.
 */
import type { Reply, RequestContext } from "../core/context.js";
import type { TokenSources } from "../config/token-from-schema.js";
import { takeCookie } from "../http/cookies.js";
import { fieldLines } from "../http/field-lines.js";
import { formDecode } from "../http/form-decode.js";
import { malformedAnswer } from "./bearer-answers.js";

/** Longest bearer token read; a longer one is refused before any parsing. */
export const MAX_BEARER_TOKEN_LENGTH = 4096;

// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
export const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

const TOO_LONG_WORDS = `the bearer token must be at most ${MAX_BEARER_TOKEN_LENGTH} bytes`;
const NOT_B64TOKEN_WORDS = "the bearer token has characters a token cannot have";

/** Why a bearer token cannot even be read (rule `malformed`), or undefined when it can. */
export function unreadableToken(token: string): string | undefined {
  if (token.length > MAX_BEARER_TOKEN_LENGTH) return TOO_LONG_WORDS;
  return B64TOKEN.test(token) ? undefined : NOT_B64TOKEN_WORDS;
}

// The request's credentials cannot be read (rule `malformed`), each case in words of its own.
const TWO_AUTHORIZATIONS = malformedAnswer("the request has more than one Authorization header");
const EMPTY_BEARER = malformedAnswer("the Bearer scheme needs a token");
const EMPTY_DPOP = malformedAnswer("the DPoP scheme needs a token");
export const NOT_B64TOKEN = malformedAnswer(NOT_B64TOKEN_WORDS);
const TOO_LONG = malformedAnswer(TOO_LONG_WORDS);
const TWO_TOKENS = malformedAnswer("the request carries more than one access token; send one");
const EMPTY_TOKEN = malformedAnswer("the access token is empty");
const TOKEN_IN_QUERY = malformedAnswer("send the token in the Authorization header, not the URI");
const NOT_ENCODED = malformedAnswer("the access_token parameter is not valid percent-encoding");

/** No token where the route reads one: answered with the config's challenge. */
export const NO_CREDENTIALS = Symbol("no credentials");

/** A token read, or why there is none to verify. */
export type Credentials = string | Reply | typeof NO_CREDENTIALS;

// RFC 9110 §11.1: the scheme is case-insensitive. Whether it is DPoP (RFC 9449 §7.1), Bearer,
// or another, which counts as no credentials.
function schemeOf(scheme: string): "bearer" | "dpop" | undefined {
  if (scheme.length === 6) return scheme.toLowerCase() === "bearer" ? "bearer" : undefined;
  return scheme.length === 4 && scheme.toLowerCase() === "dpop" ? "dpop" : undefined;
}

/**
 * The token from the Authorization header, or why there is none to verify; `ctx.dpop` says
 * whether it came with the DPoP scheme.
 */
function headerToken(ctx: RequestContext): Credentials {
  const { req } = ctx;
  const value = req.headers.authorization;
  if (value === undefined) return NO_CREDENTIALS;
  // Node keeps only the first Authorization line; RFC 9110 §5.3: it is not a list field.
  if (fieldLines(req.rawHeaders, "authorization") > 1) return TWO_AUTHORIZATIONS;
  const space = value.indexOf(" ");
  const scheme = schemeOf(space === -1 ? value : value.slice(0, space));
  if (scheme === undefined) return NO_CREDENTIALS;
  ctx.dpop = scheme === "dpop";
  const empty = ctx.dpop ? EMPTY_DPOP : EMPTY_BEARER;
  if (space === -1) return empty;
  let start = space + 1;
  while (value.charCodeAt(start) === 32) start++;
  const token = value.slice(start);
  return token === "" ? empty : token;
}

const PARAMETER = "access_token";

/** Whether a raw query has an `access_token` parameter. */
function queryHasAccessToken(query: string | null): boolean {
  if (query === null || !query.includes(PARAMETER)) return false;
  return query.split("&").some(isAccessToken);
}

function isAccessToken(part: string): boolean {
  return part === PARAMETER || part.startsWith(PARAMETER + "=");
}

/** Tokens found in one place, and how to take them out of what is forwarded. */
interface Found {
  readonly tokens: readonly (string | undefined)[];
  readonly remove: () => void;
}

function inQuery(ctx: RequestContext): Found | undefined {
  const query = ctx.query;
  if (!queryHasAccessToken(query)) return undefined;
  const parts = (query as string).split("&");
  const tokens = parts
    .filter(isAccessToken)
    // RFC 6750 §2.3: the parameter is application/x-www-form-urlencoded.
    .map((part) => formDecode(part.slice(PARAMETER.length + 1)));
  const rest = parts.filter((part) => !isAccessToken(part)).join("&");
  return { tokens, remove: () => (ctx.query = rest) };
}

// The subprotocol a page names its token by: `bearer.` then the token (RFC 6455 §4.1 lets a
// client offer several protocols, each a token, which a JWS compact serialisation is).
const PROTOCOL_PREFIX = "bearer.";

function inSubprotocol(ctx: RequestContext): Found | undefined {
  const field = ctx.req.headers["sec-websocket-protocol"];
  if (field === undefined || !field.includes(PROTOCOL_PREFIX)) return undefined;
  const entries = field.split(",").map((entry) => entry.trim());
  const own = (entry: string): boolean => entry.startsWith(PROTOCOL_PREFIX);
  const tokens = entries.filter(own).map((entry) => entry.slice(PROTOCOL_PREFIX.length));
  if (tokens.length === 0) return undefined;
  const rest = entries.filter((entry) => entry !== "" && !own(entry)).join(", ");
  const carrier = {
    field: "sec-websocket-protocol",
    rest: rest === "" ? undefined : rest,
  } as const;
  return { tokens, remove: () => (ctx.tokenCarrier = carrier) };
}

function inCookie(ctx: RequestContext, name: string): Found | undefined {
  const taken = takeCookie(ctx.req.headers.cookie, name);
  if (taken.values.length === 0) return undefined;
  const carrier = { field: "cookie", rest: taken.rest } as const;
  return { tokens: taken.values, remove: () => (ctx.tokenCarrier = carrier) };
}

/**
 * The request's one token from the places `sources` names, or why there is none to verify. More
 * than one token, in one place or several, is a malformed request (RFC 6750 §2: a client uses one
 * method). Its carrier is taken out of what the upstream receives.
 */
export function readCredentials(ctx: RequestContext, sources: TokenSources): Credentials {
  const header = sources.header ? headerToken(ctx) : NO_CREDENTIALS;
  if (typeof header === "object") return header;
  const query = sources.query ? inQuery(ctx) : undefined;
  const protocol = sources.subprotocol ? inSubprotocol(ctx) : undefined;
  const cookie = sources.cookie === undefined ? undefined : inCookie(ctx, sources.cookie);
  // Most requests carry their token in the header alone: nothing else to gather.
  if (query === undefined && protocol === undefined && cookie === undefined) {
    return checkedToken(header, ctx, sources);
  }
  const found = [query, protocol, cookie].filter((place) => place !== undefined);
  const tokens = found.flatMap((place) => place.tokens);
  if (tokens.length + (header === NO_CREDENTIALS ? 0 : 1) > 1) return TWO_TOKENS;
  for (const place of found) place.remove();
  const token = tokens[0];
  if (token === undefined) return NOT_ENCODED;
  return token === "" ? EMPTY_TOKEN : checkedToken(token, ctx, sources);
}

function checkedToken(
  token: string | typeof NO_CREDENTIALS,
  ctx: RequestContext,
  sources: TokenSources,
): Credentials {
  if (typeof token !== "string") return token;
  if (token.length > MAX_BEARER_TOKEN_LENGTH) return TOO_LONG;
  // RFC 6750 §5.3: a token in the URI leaks into logs and the upstream; a route that does not
  // read one there refuses it, whether or not the header carries one too.
  return !sources.query && queryHasAccessToken(ctx.query) ? TOKEN_IN_QUERY : token;
}
