/**
 * Checks that relate keys to one another (a client's plan, duplicate ids, routes of one path whose
 * methods overlap, a route's cost and the limits that count it, the store and its state file,
 * scopes and the known ones), each adding one problem at the key to fix. They run even when
 * another part of the file is invalid, so that one run reports every problem: each reads only the
 * values that are well-formed and leaves the rest to the schema's own messages.
 */
import type { z } from "zod";
import { POSITIVE_DURATION_PATTERN } from "./duration.js";
import { DEFAULT_RATE_NAME, limitsInForce, QUOTA_PERIODS } from "./limits-in-force.js";
import { ROUTE_METHODS } from "./route-methods.js";

/** What a refinement adds its issues to. */
export type Ctx = z.RefinementCtx<unknown>;
type Path = PropertyKey[];

/** Adds an issue at `path`, relative to the value being refined. */
export function problem(ctx: Ctx, path: Path, message: string): void {
  ctx.addIssue({ code: "custom", path, message });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function entries(value: unknown): Array<[string, unknown]> {
  return isRecord(value) ? Object.entries(value) : [];
}

function ownPaths(file: Record<string, unknown>, ctx: Ctx): void {
  const tokens = isRecord(file.tokens) ? file.tokens : {};
  const health = isRecord(file.health) ? file.health : {};
  const own: Array<[Path, unknown]> = [
    [["tokens", "path"], tokens.path],
    [["tokens", "revocation_path"], tokens.revocation_path],
    [["health", "liveness_path"], health.liveness_path],
    [["health", "readiness_path"], health.readiness_path],
  ];
  const seen = new Map<string, string>();
  for (const [path, value] of own) {
    if (typeof value !== "string") continue;
    const first = seen.get(value);
    if (first !== undefined) problem(ctx, path, `is the same path as ${first}`);
    else seen.set(value, path.join("."));
    if (path[0] === "health" && isAdminPath(value)) {
      problem(ctx, path, "is a path of the admin API, which serves the health paths too");
    }
  }
}

// The admin listener's own paths (src/admin/server.ts): a health path there would hide one.
function isAdminPath(path: string): boolean {
  return ["/metrics", "/config", "/version"].includes(path) || path.startsWith("/limits/");
}

// A plan whose content is invalid still exists: a client naming it names it rightly, and the
// schema reports what is wrong inside it. Only a `plans` that is no mapping leaves nothing to check.
function clientReferences(file: Record<string, unknown>, ctx: Ctx): void {
  const ids = new Map<string, number>();
  const plans = isRecord(file.plans) ? file.plans : undefined;
  const issuers = trustedIssuerNames(file);
  const planNamed = (path: Path, plan: unknown): void => {
    if (plans === undefined || typeof plan !== "string" || Object.hasOwn(plans, plan)) return;
    const known = Object.keys(plans);
    problem(ctx, path, `names no plan; known plans: ${known.length ? known.join(", ") : "(none)"}`);
  };
  list(file.clients).forEach((client, index) => {
    if (!isRecord(client)) return;
    const issuer = typeof client.issuer === "string" ? client.issuer : undefined;
    if (issuer !== undefined && !issuers.includes(issuer)) {
      problem(
        ctx,
        ["clients", index, "issuer"],
        `names no trusted issuer; known: ${issuers.length ? issuers.join(", ") : "(none: add tokens.trusted_issuers)"}`,
      );
    }
    if (typeof client.id === "string") {
      // Ids are unique per issuer: a provider's client may share an id with an own client.
      const folded = `${issuer ?? ""} ${client.id.toLowerCase()}`;
      const first = ids.get(folded);
      if (first !== undefined)
        problem(ctx, ["clients", index, "id"], `is already used by clients[${first}]`);
      else ids.set(folded, index);
    }
    planNamed(["clients", index, "plan"], client.plan);
  });
  trustedIssuers(file).forEach((entry, index) => {
    if (isRecord(entry)) planNamed(["tokens", "trusted_issuers", index, "plan"], entry.plan);
  });
}

function trustedIssuers(file: Record<string, unknown>): unknown[] {
  return list(isRecord(file.tokens) ? file.tokens.trusted_issuers : undefined);
}

function trustedIssuerNames(file: Record<string, unknown>): string[] {
  const names = trustedIssuers(file).flatMap((entry) =>
    isRecord(entry) && typeof entry.name === "string" ? [entry.name] : [],
  );
  return [...new Set(names)];
}

// Each provider once, by name and by issuer: a token's `iss` must name one set of keys, and a
// name one set of counters. gatehouse's own issuer is not a provider's.
function uniqueIssuers(file: Record<string, unknown>, ctx: Ctx): void {
  const tokens = isRecord(file.tokens) ? file.tokens : {};
  const ownIssuer = typeof tokens.issuer === "string" ? tokens.issuer : "gatehouse";
  for (const key of ["name", "issuer"] as const) {
    const seen = new Map<unknown, number>();
    trustedIssuers(file).forEach((entry, index) => {
      if (!isRecord(entry) || typeof entry[key] !== "string") return;
      const path = ["tokens", "trusted_issuers", index, key];
      const first = seen.get(entry[key]);
      if (first !== undefined) problem(ctx, path, `is already used by trusted_issuers[${first}]`);
      else seen.set(entry[key], index);
      if (key === "issuer" && entry.issuer === ownIssuer) {
        problem(
          ctx,
          path,
          "is gatehouse's own tokens.issuer; a provider needs an issuer of its own",
        );
      }
    });
  }
}

const KNOWN_METHODS: ReadonlySet<string> = new Set(ROUTE_METHODS);

// Entries of one path answer different methods, each with its own auth, scopes and cost: a
// method in two of them would reach only the first, whatever the second says. Here rather than
// on the routes list, whose own checks the schema skips once any route has a value of the wrong
// kind.
function overlappingRoutes(file: Record<string, unknown>, ctx: Ctx): void {
  // Per path, the entry that first lists each method.
  const byPath = new Map<string, Map<string, number>>();
  list(file.routes).forEach((route, index) => {
    if (!isRecord(route) || typeof route.path !== "string") return;
    let first = byPath.get(route.path);
    if (first === undefined) byPath.set(route.path, (first = new Map()));
    const shared = new Map<number, string[]>();
    const methods = strings(route.methods).filter((method) => KNOWN_METHODS.has(method));
    for (const method of new Set(methods)) {
      const other = first.get(method);
      if (other === undefined) first.set(method, index);
      else shared.set(other, [...(shared.get(other) ?? []), method]);
    }
    for (const [other, both] of shared) {
      problem(
        ctx,
        ["routes", index, "methods"],
        `${both.join(", ")} ${both.length === 1 ? "is" : "are"} also in routes[${other}] ` +
          "of the same path; list each of a path's methods in one entry only",
      );
    }
  });
}

function stateFileStore(file: Record<string, unknown>, ctx: Ctx): void {
  const limits = isRecord(file.limits) ? file.limits : {};
  if (
    limits.store === "redis" &&
    typeof limits.state_file === "string" &&
    limits.state_file !== ""
  ) {
    problem(ctx, ["limits", "state_file"], "is for the memory store; Redis keeps its own counters");
  }
}

/** One limit in force, as a message names it. */
interface CountedLimit {
  readonly limit: number;
  /** Such as `rate limit "burst" (1 per 1s)` or `quota (3 per hour)`. */
  readonly text: string;
}

function countable(limit: unknown): limit is number {
  return Number.isSafeInteger(limit) && (limit as number) >= 1;
}

function isDuration(value: unknown): value is string {
  return typeof value === "string" && new RegExp(POSITIVE_DURATION_PATTERN).test(value);
}

// A limit is judged only when it is well-formed; the schema reports the others.
function rateLimit(name: string, value: unknown): CountedLimit[] {
  if (!isRecord(value) || !countable(value.limit) || !isDuration(value.window)) return [];
  return [
    { limit: value.limit, text: `rate limit "${name}" (${value.limit} per ${value.window})` },
  ];
}

// The limits a holder (a plan or a client) sets, read as the limits module compiles them: the
// one-limit form first, named `default`.
function ratesOf(holder: Record<string, unknown> | undefined): CountedLimit[] {
  if (holder === undefined) return [];
  if (holder.rate_limit !== undefined) return rateLimit(DEFAULT_RATE_NAME, holder.rate_limit);
  return entries(holder.rate_limits).flatMap(([name, value]) => rateLimit(name, value));
}

function quotaOf(holder: Record<string, unknown> | undefined): CountedLimit[] {
  const quota = holder?.quota;
  if (!isRecord(quota) || !countable(quota.limit)) return [];
  const period = QUOTA_PERIODS.find((known) => known === quota.period);
  if (period === undefined) return [];
  return [{ limit: quota.limit, text: `quota (${quota.limit} per ${period})` }];
}

/** Whose limits count a route, named as a message names them, and the smallest of them. */
interface Counter {
  readonly who: string;
  readonly least: CountedLimit;
}

function counter(who: string, limits: readonly CountedLimit[]): Counter[] {
  const least = limits.reduce<CountedLimit | undefined>(
    (found, next) => (found === undefined || next.limit < found.limit ? next : found),
    undefined,
  );
  return least === undefined ? [] : [{ who, least }];
}

// A route costing more than a limit that counts it is refused by that limit on every request,
// with a Retry-After that never comes true. Only limits in force count: anonymous requests are
// counted by the `anonymous` plan; a bearer token's requests by its client's limits (its plan,
// with its own overrides in place of the plan's). A plan that no client holds counts nothing.
function unservableRoutes(file: Record<string, unknown>, ctx: Ctx): void {
  const plans: Record<string, Record<string, unknown>> = {};
  for (const [name, plan] of entries(file.plans)) if (isRecord(plan)) plans[name] = plan;
  const anonymousPlan = plans.anonymous;
  const anonymous = counter("the anonymous plan", [
    ...ratesOf(anonymousPlan),
    ...quotaOf(anonymousPlan),
  ]);
  const bearer = list(file.clients).flatMap((client, index) => {
    if (!isRecord(client)) return [];
    const { rates, quota } = limitsInForce(client, plans);
    const who = typeof client.id === "string" ? `client "${client.id}"` : `clients[${index}]`;
    return counter(who, [...ratesOf(rates), ...quotaOf(quota)]);
  });
  list(file.routes).forEach((route, index) => {
    if (!isRecord(route) || !countable(route.cost)) return;
    const counters = route.auth === "none" ? anonymous : route.auth === "bearer" ? bearer : [];
    for (const { who, least } of counters) {
      if (route.cost <= least.limit) continue;
      problem(
        ctx,
        ["routes", index, "cost"],
        `is ${route.cost}, above ${who}'s ${least.text}: ` +
          "its requests to this route can never be served",
      );
    }
  });
}

function strings(value: unknown): string[] {
  return list(value).filter((entry) => typeof entry === "string");
}

// RFC 6749 §3.3: the server defines the scopes; a scope that `tokens.scopes` does not list is a
// typo that would grant, or require, something nobody can have.
function knownScopes(file: Record<string, unknown>, ctx: Ctx): void {
  const tokens = isRecord(file.tokens) ? file.tokens : {};
  const known = new Set(strings(tokens.scopes));
  const listing = known.size === 0 ? "tokens.scopes is empty" : `known: ${[...known].join(", ")}`;
  const unknown = (path: Path, values: unknown): void => {
    list(values).forEach((scope, index) => {
      if (typeof scope === "string" && !known.has(scope)) {
        problem(ctx, [...path, index], `names a scope tokens.scopes does not list (${listing})`);
      }
    });
  };
  list(file.clients).forEach((client, index) => {
    if (!isRecord(client)) return;
    unknown(["clients", index, "scopes"], client.scopes);
    unknown(["clients", index, "default_scopes"], client.default_scopes);
    const own = new Set(strings(client.scopes));
    list(client.default_scopes).forEach((scope, at) => {
      if (typeof scope === "string" && known.has(scope) && !own.has(scope)) {
        problem(ctx, ["clients", index, "default_scopes", at], "is not among the client's scopes");
      }
    });
  });
  list(file.routes).forEach((route, index) => {
    if (!isRecord(route)) return;
    unknown(["routes", index, "scopes"], route.scopes);
    unknown(["routes", index, "scopes_any"], route.scopes_any);
  });
}

// RFC 9449 §9: nonces are made under a secret every replica holds. Where gatehouse issues no
// tokens, it has no signing key to derive one from.
function nonceSecret(file: Record<string, unknown>, ctx: Ctx): void {
  const tokens = isRecord(file.tokens) ? file.tokens : {};
  const dpop = isRecord(tokens.dpop) ? tokens.dpop : {};
  if (dpop.nonce !== true || dpop.nonce_secret_env !== undefined) return;
  const ownClient = list(file.clients).some(
    (client) => isRecord(client) && client.issuer === undefined,
  );
  if (ownClient || trustedIssuers(file).length === 0) return;
  problem(
    ctx,
    ["tokens", "dpop", "nonce_secret_env"],
    "is needed for nonces where gatehouse issues no tokens: it has no signing key to derive them from",
  );
}

/** Checks keys of different sections against each other; see the module comment. */
export function crossChecks(file: unknown, ctx: Ctx): void {
  if (!isRecord(file)) return;
  ownPaths(file, ctx);
  clientReferences(file, ctx);
  uniqueIssuers(file, ctx);
  overlappingRoutes(file, ctx);
  stateFileStore(file, ctx);
  unservableRoutes(file, ctx);
  knownScopes(file, ctx);
  nonceSecret(file, ctx);
}
