/**
 * Checks that relate keys of different sections, each adding one issue at the key to fix. They
 * run even when another part of the file is invalid, so that one run reports every problem: each
 * reads only the values that are well-formed and leaves the rest to the schema's own messages.
 */
import type { z } from "zod";
import { where } from "./key-path.js";

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

// True when the schema already reported a problem under `section`: a check reading it would
// only repeat that problem in other words.
function invalid(ctx: Ctx, section: string): boolean {
  return ctx.issues.some((issue) => issue.path?.[0] === section);
}

function ownPaths(file: Record<string, unknown>, ctx: Ctx): void {
  const tokens = isRecord(file.tokens) ? file.tokens : {};
  const health = isRecord(file.health) ? file.health : {};
  const own: Array<[Path, unknown]> = [
    [["tokens", "path"], tokens.path],
    [["health", "liveness_path"], health.liveness_path],
    [["health", "readiness_path"], health.readiness_path],
  ];
  const seen = new Map<string, string>();
  for (const [path, value] of own) {
    if (typeof value !== "string") continue;
    const first = seen.get(value);
    if (first !== undefined) problem(ctx, path, `is the same path as ${first}`);
    else seen.set(value, path.join("."));
  }
}

function clientReferences(file: Record<string, unknown>, ctx: Ctx): void {
  const ids = new Map<string, number>();
  const plansKnown = !invalid(ctx, "plans");
  const plans = isRecord(file.plans) ? file.plans : {};
  list(file.clients).forEach((client, index) => {
    if (!isRecord(client)) return;
    if (typeof client.id === "string") {
      const folded = client.id.toLowerCase();
      const first = ids.get(folded);
      if (first !== undefined)
        problem(ctx, ["clients", index, "id"], `is already used by clients[${first}]`);
      else ids.set(folded, index);
    }
    if (plansKnown && typeof client.plan === "string" && !Object.hasOwn(plans, client.plan)) {
      const known = Object.keys(plans);
      problem(
        ctx,
        ["clients", index, "plan"],
        `names no plan; known plans: ${known.length ? known.join(", ") : "(none)"}`,
      );
    }
  });
}

/** One limit set in the file: how many points it allows, and where it is written. */
interface CountedLimit {
  readonly limit: number;
  readonly path: Path;
}

function countable(limit: unknown): limit is number {
  return Number.isSafeInteger(limit) && (limit as number) >= 1;
}

/**
 * Every limit that a plan or a client override sets, found by shape: each value holding a `limit`,
 * at any depth, so that limits grouped under a name are found as well.
 */
function limitsOf(holder: unknown, at: Path): CountedLimit[] {
  return entries(holder).flatMap(([key, value]): CountedLimit[] => {
    if (!isRecord(value)) return [];
    if (countable(value.limit)) return [{ limit: value.limit, path: [...at, key, "limit"] }];
    return limitsOf(value, [...at, key]);
  });
}

function smallest(limits: readonly CountedLimit[]): CountedLimit | undefined {
  return limits.reduce<CountedLimit | undefined>(
    (least, next) => (least === undefined || next.limit < least.limit ? next : least),
    undefined,
  );
}

// A route costing more than a limit that counts it is refused by that limit on every request,
// with a Retry-After that never comes true. Anonymous requests are counted by the `anonymous`
// plan; a bearer token's client may be held to any plan or to its own overrides.
function unservableRoutes(file: Record<string, unknown>, ctx: Ctx): void {
  const plans = entries(file.plans);
  const bearer = smallest([
    ...plans.flatMap(([name, plan]) => limitsOf(plan, ["plans", name])),
    ...list(file.clients).flatMap((client, index) => limitsOf(client, ["clients", index])),
  ]);
  const anonymousPlan = plans.find(([name]) => name === "anonymous")?.[1];
  const anonymous = smallest(limitsOf(anonymousPlan, ["plans", "anonymous"]));
  list(file.routes).forEach((route, index) => {
    if (!isRecord(route) || !countable(route.cost)) return;
    const least = route.auth === "none" ? anonymous : bearer;
    if (least === undefined || route.cost <= least.limit) return;
    problem(
      ctx,
      ["routes", index, "cost"],
      `is ${route.cost}, above the limit of ${least.limit} set at ${where(least.path)}: ` +
        "every request to this route would be refused",
    );
  });
}

/** Checks keys of different sections against each other; see the module comment. */
export function crossChecks(file: unknown, ctx: Ctx): void {
  if (!isRecord(file)) return;
  ownPaths(file, ctx);
  clientReferences(file, ctx);
  unservableRoutes(file, ctx);
}
