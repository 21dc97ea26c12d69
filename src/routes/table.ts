/** The route allowlist, compiled once per config snapshot. */
import type { RouteConfig } from "../config/schema.js";
import { canonicalTarget } from "../http/path.js";

/** A route ready for matching. */
export interface Route {
  /** The pattern as written in the file, used as the `route` label in logs and metrics. */
  readonly pattern: string;
  readonly methods: ReadonlySet<string>;
  readonly cost: number;
  readonly auth: "bearer" | "none";
  readonly matcher: RegExp;
}

/** The outcome of looking a request up: a route, a 405 with the allowed methods, or a 404. */
export type RouteMatch =
  | { readonly kind: "route"; readonly route: Route }
  | { readonly kind: "method_not_allowed"; readonly allow: string }
  | { readonly kind: "not_found" };

const NOT_FOUND: RouteMatch = Object.freeze({ kind: "not_found" });

/** The compiled allowlist; the first route matching both path and method wins. */
export interface RouteTable {
  readonly routes: readonly Route[];
  match(method: string, path: string): RouteMatch;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// The config writes paths as a client would; compare them in the same canonical form.
function canonicalSegment(segment: string): string {
  const canonical = canonicalTarget("/" + segment);
  return typeof canonical === "string" ? "/" + segment : canonical.path;
}

/** Compiles a pattern: literal segments, `*` for exactly one non-empty segment, final `**` for a subtree. */
export function compilePattern(pattern: string): RegExp {
  const segments = pattern.slice(1).split("/");
  let source = "^";
  for (const segment of segments) {
    if (segment === "**") source += "(?:/.*)?";
    else if (segment === "*") source += "/[^/]+";
    else source += escape(canonicalSegment(segment));
  }
  return new RegExp(source + "$");
}

/** Builds the table from validated route entries. */
export function compileRoutes(entries: readonly RouteConfig[]): RouteTable {
  const routes: Route[] = entries.map((entry) =>
    Object.freeze({
      pattern: entry.path,
      methods: new Set(entry.methods),
      cost: entry.cost,
      auth: entry.auth,
      matcher: compilePattern(entry.path),
    }),
  );
  return Object.freeze({
    routes: Object.freeze(routes),
    match(method: string, path: string): RouteMatch {
      let allowed: Set<string> | undefined;
      for (const route of routes) {
        if (!route.matcher.test(path)) continue;
        if (route.methods.has(method)) return { kind: "route", route };
        allowed ??= new Set();
        for (const m of route.methods) allowed.add(m);
      }
      if (allowed === undefined) return NOT_FOUND;
      return { kind: "method_not_allowed", allow: [...allowed].join(", ") };
    },
  });
}
