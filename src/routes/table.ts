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

// The one canonical path a pattern without wildcards matches, or undefined when it has one.
function literalPath(pattern: string): string | undefined {
  const segments = pattern.slice(1).split("/");
  if (segments.some((segment) => segment === "*" || segment === "**")) return undefined;
  return segments.map(canonicalSegment).join("");
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
  const found = routes.map((route): RouteMatch => Object.freeze({ kind: "route", route }));
  // Most requests ask for a literal path: a route that is the first to match its own path is
  // found by that path at once. Other requests, and other methods, scan the table in order.
  const firstByPath = new Map<string, number>();
  routes.forEach((route, index) => {
    const path = literalPath(route.pattern);
    if (path === undefined || firstByPath.has(path)) return;
    if (routes.slice(0, index).some((earlier) => earlier.matcher.test(path))) return;
    firstByPath.set(path, index);
  });
  return Object.freeze({
    routes: Object.freeze(routes),
    match(method: string, path: string): RouteMatch {
      const first = firstByPath.get(path);
      if (first !== undefined && (routes[first] as Route).methods.has(method)) {
        return found[first] as RouteMatch;
      }
      let allowed: Set<string> | undefined;
      for (let i = 0; i < routes.length; i++) {
        const route = routes[i] as Route;
        if (!route.matcher.test(path)) continue;
        if (route.methods.has(method)) return found[i] as RouteMatch;
        allowed ??= new Set();
        for (const m of route.methods) allowed.add(m);
      }
      if (allowed === undefined) return NOT_FOUND;
      return { kind: "method_not_allowed", allow: [...allowed].join(", ") };
    },
  });
}
