/**
 * The admin API's view of one client's or one address's counters: read without consuming
 * anything, or reset (in Redis, for every replica). `GET|DELETE /limits/clients/{id}` and
 * `GET|DELETE /limits/addresses/{address}`.
 */
import { isIP } from "node:net";
import type { Snapshot } from "../config/snapshot.js";
import { errorReply, type Reply } from "../core/context.js";
import { addressKey } from "../limits/client-key.js";
import type { CounterStore } from "../limits/counters.js";
import { decide } from "../limits/decide.js";
import { preparePlan } from "../limits/enforce.js";
import { clientPlan, type Plan } from "../limits/plans.js";
import { OWN_ISSUER_NAME } from "../config/issuers-schema.js";

/** An admin answer: a status and, but for 204, a JSON body. */
export type AdminAnswer = Reply;

/** What the limits admin reads: the config in force, its store and the clock. */
export interface LimitsAdminDeps {
  current(): { readonly config: Snapshot; readonly limiterStore: CounterStore };
  readonly now: () => number;
}

/** What a `DELETE` reset: a client's counters or an address's (folded), under which plan. */
export type LimitsReset = ({ readonly client: string } | { readonly address: string }) & {
  readonly plan: string | null;
};

/** One limit as the admin API shows it. */
interface LimitView {
  readonly name: string;
  readonly kind: "rate" | "quota";
  readonly limit: number;
  readonly remaining: number;
  readonly reset: number;
  readonly window: string;
}

const PATH = /^\/limits\/(clients|addresses)\/([^/?]+)$/;

function notFound(message: string): AdminAnswer {
  return errorReply(404, "not_found", message);
}

/** Whose counters a path names, or the answer when it names none. */
type Target =
  | { readonly kind: "client"; readonly id: string; readonly subject: string }
  | { readonly kind: "address"; readonly folded: string; readonly subject: string };

function target(kind: string, raw: string): Target | AdminAnswer {
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch {
    return errorReply(400, "invalid_request", "the path is not valid");
  }
  if (kind === "clients") return { kind: "client", id: text, subject: `client:${text}` };
  if (isIP(text.replace(/%.*$/, "")) === 0) {
    return errorReply(400, "invalid_request", "the address is not an IPv4 or IPv6 address");
  }
  const subject = addressKey(text);
  return { kind: "address", folded: subject.slice("ip:".length), subject };
}

/**
 * Answers a `/limits/...` request, or returns undefined when the path is not one; `onReset` hears
 * of each reset once it is done.
 */
export async function limitsAdmin(
  method: "GET" | "DELETE",
  path: string,
  deps: LimitsAdminDeps,
  onReset: (reset: LimitsReset) => void,
): Promise<AdminAnswer | undefined> {
  const match = PATH.exec(path);
  if (match === null) return undefined;
  const who = target(match[1] as string, match[2] as string);
  if ("status" in who) return who;
  const { config, limiterStore } = deps.current();
  const { limits } = config;
  let plan: Plan | undefined;
  if (who.kind === "client") {
    const issuer = issuerOf(config, who.id);
    if (issuer === undefined) {
      return notFound(`no client ${JSON.stringify(who.id)} in the configuration`);
    }
    plan = clientPlan(limits.clients, limits.issuers, who.id, issuer);
  } else {
    plan = limits.anonymous;
    if (plan === undefined) return notFound("the configuration has no anonymous plan");
  }
  const nowMs = deps.now();
  const slots = plan === undefined ? [] : preparePlan(plan).slots(nowMs);
  const owner = who.kind === "client" ? { client: who.id } : { address: who.folded };
  if (method === "DELETE") {
    await limiterStore.reset(who.subject, slots);
    onReset({ ...owner, plan: plan?.name ?? null });
    return { status: 204 };
  }
  const views =
    plan === undefined
      ? []
      : view(plan, await limiterStore.read(who.subject, slots, nowMs, false), nowMs);
  return { status: 200, body: { ...owner, plan: plan?.name ?? null, limits: views } };
}

/**
 * The issuer of the client `key` names: `own` for a listed own client (`<id>`), the issuer's name
 * for `<issuer>:<id>` when the issuer lists that client or has a plan for unlisted ones;
 * undefined when the configuration knows no such client.
 */
function issuerOf(config: Snapshot, key: string): string | undefined {
  const { clients, tokens } = config.file;
  const colon = key.indexOf(":");
  if (colon === -1) {
    const own = clients.some((client) => client.issuer === undefined && client.id === key);
    return own ? OWN_ISSUER_NAME : undefined;
  }
  const name = key.slice(0, colon);
  const id = key.slice(colon + 1);
  const issuer = tokens.trusted_issuers.find((entry) => entry.name === name);
  if (issuer === undefined || id === "") return undefined;
  const listed = clients.some((client) => client.issuer === name && client.id === id);
  return listed || issuer.plan !== undefined ? name : undefined;
}

function view(plan: Plan, counted: Awaited<ReturnType<CounterStore["read"]>>, nowMs: number) {
  const decision = decide(plan, counted, 0, nowMs, false);
  return decision.limits.map((state, i): LimitView => {
    const rate = plan.rates[i];
    return {
      name: state.name,
      kind: rate === undefined ? "quota" : "rate",
      limit: state.limit,
      remaining: state.remaining,
      reset: state.resetSeconds,
      window: rate?.window ?? plan.quota?.period ?? "",
    };
  });
}
