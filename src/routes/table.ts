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

/**
 * Whether a pattern other than the literal path itself matches it. `segments` are a canonical
 * path's segments, each with its leading "/"; `*` is one non-empty one. `exact`: the walk so far
 * took literal segments only, so a pattern ending at the path's end is the path itself.
 */
function matchedByOther(
  node: PatternNode,
  segments: readonly string[],
  from: number,
  exact: boolean,
): boolean {
  if (node.subtree) return true;
  if (from === segments.length) return node.end && !exact;
  const segment = segments[from] as string;
  const literal = node.children.get(segment);
  if (literal !== undefined && matchedByOther(literal, segments, from + 1, exact)) return true;
  const any = segment === "/" ? undefined : node.children.get("*");
  return any !== undefined && matchedByOther(any, segments, from + 1, false);
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
 * A table built one route at a time, in the file's order. Most requests ask for a literal path:
 * the routes written as that very path (several, with different methods) are found by the path,
 * unless another pattern before them matches it too. Other requests, and methods none of them
 * allows, scan the table in order.
 */
function tableBuilder(): { add(entry: RouteConfig): void; table(): RouteTable } {
  const routes: Route[] = [];
  const found: RouteMatch[] = [];
  const firstByPath = new Map<string, number>();
  // For each route, the next one written as the same literal path and found by it, or -1. A
  // valid file has at most one route per method for a path: the chain is a few links long.
  const nextOfPath: number[] = [];
  const earlier = patternNode();
  return {
    add(entry) {
      const { route, segments: own } = compileEntry(entry);
      const index = routes.length;
      nextOfPath.push(-1);
      const literal = !own.some((segment) => segment === "*" || segment === "**");
      if (literal && !matchedByOther(earlier, own, 0, true)) {
        const path = own.join("");
        let last = firstByPath.get(path);
        if (last === undefined) firstByPath.set(path, index);
        else {
          while (nextOfPath[last] !== -1) last = nextOfPath[last] as number;
          nextOfPath[last] = index;
        }
      }
      addPattern(earlier, own);
      routes.push(route);
      found.push(Object.freeze({ kind: "route", route }));
    },
    table: () => tableOf(routes, found, firstByPath, nextOfPath),
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
  nextOfPath: readonly number[],
): RouteTable {
  return Object.freeze({
    routes: Object.freeze(routes),
    match(method: string, path: string): RouteMatch {
      for (let i = firstByPath.get(path) ?? -1; i !== -1; i = nextOfPath[i] as number) {
        if ((routes[i] as Route).methods.has(method)) return found[i] as RouteMatch;
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
