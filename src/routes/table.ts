/** The route allowlist, compiled once per config snapshot. */
import { setImmediate as nextTurn } from "node:timers/promises";
import type { RouteConfig } from "../config/schema.js";
import { canonicalTarget } from "../http/path.js";
import { tokenSourcesOf, type TokenSources } from "../config/token-from-schema.js";

/** The scopes a route needs (RFC 6750 §3.1): every one of `names`, or one of them. */
export interface ScopeRule {
  readonly every: boolean;
  readonly names: readonly string[];
  /** `names` space-separated, as the challenge's `scope` attribute carries them. */
  readonly text: string;
}

/** A route ready for matching. */
export interface Route {
  /** The pattern as written in the file, used as the `route` label in logs and metrics. */
  readonly pattern: string;
  readonly methods: ReadonlySet<string>;
  readonly cost: number;
  readonly auth: "bearer" | "none";
  /** `scopes` or `scopes_any`; undefined when the route needs none. */
  readonly scopes: ScopeRule | undefined;
  /** `dpop: required`: only a DPoP-bound token with its proof passes (RFC 9449 §7). */
  readonly dpopRequired: boolean;
  /** `websocket: true`: a WebSocket handshake is passed on, then the frames both ways. */
  readonly websocket: boolean;
  /** Where the token is read (`token_from`). */
  readonly tokenFrom: TokenSources;
  /** The origins whose pages may use the route (`origins`); undefined: any. */
  readonly origins: ReadonlySet<string> | undefined;
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

// A pattern's segments: wildcards as written, literal ones in canonical form (with their "/").
function patternSegments(pattern: string): string[] {
  return pattern
    .slice(1)
    .split("/")
    .map((segment) => (segment === "*" || segment === "**" ? segment : canonicalSegment(segment)));
}

function matcherOf(segments: readonly string[]): RegExp {
  let source = "^";
  for (const segment of segments) {
    if (segment === "**") source += "(?:/.*)?";
    else if (segment === "*") source += "/[^/]+";
    else source += escape(segment);
  }
  return new RegExp(source + "$");
}

/** Compiles a pattern: literal segments, `*` for exactly one non-empty segment, final `**` for a subtree. */
export function compilePattern(pattern: string): RegExp {
  return matcherOf(patternSegments(pattern));
}

/**
 * The patterns seen so far, as a tree of canonical segments, asked whether any of them matches a
 * literal path: a lookup walks the path's segments once instead of testing every earlier route.
 */
interface PatternNode {
  readonly children: Map<string, PatternNode>;
  /** A pattern ends here. */
  end: boolean;
  /** A pattern ends here with `**`: any rest of the path matches. */
  subtree: boolean;
}

function patternNode(): PatternNode {
  return { children: new Map(), end: false, subtree: false };
}

function addPattern(root: PatternNode, segments: readonly string[]): void {
  let node = root;
  for (const segment of segments) {
    if (segment === "**") {
      node.subtree = true;
      return;
    }
    let child = node.children.get(segment);
    if (child === undefined) node.children.set(segment, (child = patternNode()));
    node = child;
  }
  node.end = true;
}

// `segments` are a canonical path's segments, each with its leading "/"; `*` is one non-empty one.
function matchesPattern(node: PatternNode, segments: readonly string[], from: number): boolean {
  if (node.subtree) return true;
  if (from === segments.length) return node.end;
  const segment = segments[from] as string;
  const literal = node.children.get(segment);
  if (literal !== undefined && matchesPattern(literal, segments, from + 1)) return true;
  const any = segment === "/" ? undefined : node.children.get("*");
  return any !== undefined && matchesPattern(any, segments, from + 1);
}

interface CompiledRoute {
  readonly route: Route;
  /** The pattern's segments, literal ones canonical. */
  readonly segments: readonly string[];
}

function scopeRule(entry: RouteConfig): ScopeRule | undefined {
  const names = entry.scopes ?? entry.scopes_any;
  if (names === undefined) return undefined;
  return Object.freeze({ every: entry.scopes !== undefined, names, text: names.join(" ") });
}

function compileEntry(entry: RouteConfig): CompiledRoute {
  const segments = patternSegments(entry.path);
  const route = Object.freeze({
    pattern: entry.path,
    methods: new Set(entry.methods),
    cost: entry.cost,
    auth: entry.auth,
    scopes: scopeRule(entry),
    dpopRequired: entry.dpop === "required",
    websocket: entry.websocket,
    tokenFrom: tokenSourcesOf(entry.token_from),
    origins: entry.origins === undefined ? undefined : new Set(entry.origins),
    matcher: matcherOf(segments),
  });
  return { route, segments };
}

// Routes compiled between two turns of the event loop when a reload builds a large table.
const SLICE = 500;

/**
 * A table built one route at a time, in the file's order. Most requests ask for a literal path: a
 * route that is the first to match its own path is found by that path at once. Other requests,
 * and other methods, scan the table in order.
 */
function tableBuilder(): { add(entry: RouteConfig): void; table(): RouteTable } {
  const routes: Route[] = [];
  const found: RouteMatch[] = [];
  const firstByPath = new Map<string, number>();
  const earlier = patternNode();
  return {
    add(entry) {
      const { route, segments: own } = compileEntry(entry);
      const literal = !own.some((segment) => segment === "*" || segment === "**");
      if (literal && !matchesPattern(earlier, own, 0)) firstByPath.set(own.join(""), routes.length);
      addPattern(earlier, own);
      routes.push(route);
      found.push(Object.freeze({ kind: "route", route }));
    },
    table: () => tableOf(routes, found, firstByPath),
  };
}

/** Builds the table from validated route entries. */
export function compileRoutes(entries: readonly RouteConfig[]): RouteTable {
  const builder = tableBuilder();
  for (const entry of entries) builder.add(entry);
  return builder.table();
}

/**
 * Builds the table as compileRoutes does, yielding to the event loop between slices of routes, so
 * that a reload of a large file does not hold requests in flight meanwhile.
 */
export async function compileRoutesInSlices(entries: readonly RouteConfig[]): Promise<RouteTable> {
  const builder = tableBuilder();
  for (let start = 0; start < entries.length; start += SLICE) {
    for (const entry of entries.slice(start, start + SLICE)) builder.add(entry);
    await nextTurn();
  }
  return builder.table();
}

function tableOf(
  routes: readonly Route[],
  found: readonly RouteMatch[],
  firstByPath: ReadonlyMap<string, number>,
): RouteTable {
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
