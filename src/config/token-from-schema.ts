/**
 * Where a route reads its access token (`token_from`) and which sites' pages may use it
 * (`origins`). A browser cannot set Authorization on a WebSocket handshake, so a page sends its
 * token in the URI (RFC 6750 §2.3), as a subprotocol, or in a cookie; a cookie rides along with
 * every site's requests, so a route that reads one names the sites it serves.
 */
import { z } from "zod";
import { problem, type Ctx } from "./cross-checks.js";

// RFC 6265 §4.1.1: a cookie-name is an RFC 2616 token.
const COOKIE_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

const CARRIERS = ["header", "query", "subprotocol"] as const;

const TokenSourceSchema = z.union(
  [
    z.enum(CARRIERS),
    z.strictObject({
      cookie: z
        .string()
        .regex(COOKIE_NAME, {
          error: "must be a cookie name (RFC 6265: letters, digits, !#$%&'*+-.^_`|~)",
        })
        .describe("The cookie that carries the token."),
    }),
  ],
  { error: "must be header, query, subprotocol or {cookie: NAME}" },
);

/** `routes[].token_from`: where the route reads the token, Authorization alone by default. */
export const tokenFromSchema = z
  .array(TokenSourceSchema)
  .min(1, { error: "must list at least one place" })
  .default(["header"])
  .describe(
    "Where the token is read: header (Authorization), query (access_token, RFC 6750 §2.3), " +
      "subprotocol (a Sec-WebSocket-Protocol entry bearer.<token>), {cookie: NAME}.",
  );

// RFC 6454 §6.2: an origin as a browser serialises it in the Origin field.
function checkOrigin(value: string, ctx: Ctx): void {
  const url = URL.parse(value);
  const ok = url !== null && (url.protocol === "https:" || url.protocol === "http:");
  if (!ok || url.origin !== value) {
    const hint = ok ? `; write ${url.origin}` : "";
    problem(ctx, [], `must be an origin as a browser sends it, scheme://host[:port]${hint}`);
  }
}

/** `routes[].origins`: the sites whose pages may use the route. */
export const originsSchema = z
  .array(z.string().superRefine(checkOrigin))
  .min(1, { error: "must list at least one origin" })
  .optional()
  .describe(
    "Origins (https://app.example.com) whose pages may use this route: another Origin is " +
      "refused 403; a token read from a cookie needs one of these.",
  );

type TokenSource = z.infer<typeof TokenSourceSchema>;

/** Where a route reads its token, compiled from `token_from`. */
export interface TokenSources {
  readonly header: boolean;
  readonly query: boolean;
  readonly subprotocol: boolean;
  /** The cookie's name, when one carries the token. */
  readonly cookie: string | undefined;
}

/** Compiles a validated `token_from`. */
export function tokenSourcesOf(sources: readonly TokenSource[]): TokenSources {
  const cookie = sources.find((source) => typeof source === "object");
  return Object.freeze({
    header: sources.includes("header"),
    query: sources.includes("query"),
    subprotocol: sources.includes("subprotocol"),
    cookie: cookie?.cookie,
  });
}

function sourceName(source: TokenSource): string {
  return typeof source === "string" ? source : "cookie";
}

/** How `token_from` and `origins` fit the rest of their route. */
export function checkTokenSources(
  route: {
    token_from: readonly TokenSource[];
    origins?: readonly string[] | undefined;
    auth: string;
    websocket: boolean;
  },
  ctx: Ctx,
): void {
  const seen = new Set<string>();
  route.token_from.forEach((source, index) => {
    const name = sourceName(source);
    if (seen.has(name)) problem(ctx, ["token_from", index], `lists ${name} twice`);
    seen.add(name);
  });
  const custom = route.token_from.length !== 1 || route.token_from[0] !== "header";
  if (custom && route.auth !== "bearer") {
    problem(ctx, ["token_from"], "has no use on an auth: none route, which reads no token");
  }
  if (seen.has("subprotocol") && !route.websocket) {
    problem(
      ctx,
      ["token_from"],
      "lists subprotocol, which only a WebSocket handshake carries: set websocket: true",
    );
  }
  if (seen.has("cookie") && route.origins === undefined) {
    problem(
      ctx,
      ["origins"],
      "must list the sites that may use this route: a browser sends its cookie with every site's requests",
    );
  }
  if (route.origins !== undefined && !route.websocket && !seen.has("cookie")) {
    problem(
      ctx,
      ["origins"],
      "applies to WebSocket routes and routes reading a cookie; this route is neither",
    );
  }
}
