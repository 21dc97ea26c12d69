/**
 * What gatehouse, with one configuration, would decide for a bearer token on an `auth: bearer`
 * route, and why: the token's header and claims, the issuer it names, the key it names, the
 * verdict of the verifier the authenticate stage uses, and for a token it accepts, the client,
 * plan, scopes and routes. The facts only: `gatehouse token check` prints them.
 */
import { decodeJwt, decodeProtectedHeader, type JWTPayload } from "jose";
import { OWN_ISSUER_NAME } from "../config/issuers-schema.js";
import type { Snapshot } from "../config/snapshot.js";
import { DEFAULT_RATE_NAME } from "../config/limits-in-force.js";
import { clientPlan, type Plan } from "../limits/plans.js";
import { readStateFile } from "../limits/state-file.js";
import type { Route } from "../routes/table.js";
import { KeysUnavailable } from "../tokens/provider-tokens.js";
import type { TrustedIssuer } from "../tokens/settings.js";
import { createTokenVerifier, TokenRejected, type VerifiedToken } from "../tokens/verify.js";
import { fetchOnce, ownKeyFact, providerKeyFact, type KeyFact } from "./token-keys.js";
import { refusalOf, STAGE_REFUSALS, syntaxRefusal, type Verdict } from "./token-refusals.js";

/** A time claim: the number as signed, the instant it names, and how far from now. */
export interface TimeClaim {
  readonly epoch: number;
  readonly iso: string;
  readonly relative: string;
}

/** The issuer the token's `iss` names. */
export interface IssuerFact {
  /** `own`, a trusted issuer's `name`, or null: none that gatehouse trusts. */
  readonly name: string | null;
  /** What the token's `aud` must hold one of; null for an issuer not trusted. */
  readonly audiences: readonly string[] | null;
  /** What the token may be signed with; null for an issuer not trusted. */
  readonly algorithms: readonly string[] | null;
  readonly note: string;
}

/** Whether the token was revoked at gatehouse (RFC 7009), as far as can be read offline. */
export interface RevocationFact {
  readonly checked: boolean;
  readonly revoked: boolean;
  readonly note: string;
}

/** The client an accepted token is for. */
export interface ClientFact {
  readonly id: string;
  /** `own`, or the trusted issuer's `name`. */
  readonly issuer: string;
  /** How the admin API, `gatehouse limits` and the counters name it. */
  readonly key: string;
  /** Whether `clients` lists it (a provider's unlisted client takes the issuer's plan). */
  readonly listed: boolean;
}

/** The plan that counts the client's requests. */
export interface PlanFact {
  readonly name: string;
  /** Each limit in words: `1000 per 1h`, `quota 50000 per month`. */
  readonly limits: readonly string[];
  /** `limits.dry_run`: counted, never refused. */
  readonly dryRun: boolean;
}

/** One `auth: bearer` route, and whether the token's scopes let it through. */
export interface RouteFact {
  readonly methods: readonly string[];
  readonly path: string;
  readonly allowed: boolean;
  /** The route's scopes: `every` of them, or one of them; null when it needs none. */
  readonly needs: { readonly every: boolean; readonly scopes: readonly string[] } | null;
  /** The needed scopes the token does not hold. */
  readonly missing: readonly string[];
  /** The route takes only DPoP-bound tokens (`dpop: required`) and this one is not bound. */
  readonly needsBinding: boolean;
}

/** Everything `gatehouse token check` says about one token. */
export interface TokenReport {
  readonly verdict: Verdict;
  /** Why the token cannot be read as a JWT; null when it can. */
  readonly notJwt: string | null;
  /** `alg`, `typ` and `kid` of its protected header; null when it has none that can be read. */
  readonly header: Readonly<Record<string, unknown>> | null;
  /** The claims gatehouse reads, time claims as TimeClaim; null when there are none to read. */
  readonly claims: Readonly<Record<string, unknown>> | null;
  readonly issuer: IssuerFact;
  readonly key: KeyFact;
  /** Null when the verdict came before it, or for a provider's token (revocation is its own). */
  readonly revocation: RevocationFact | null;
  /** The facts of an accepted token; null otherwise. */
  readonly client: ClientFact | null;
  /**
   * The thumbprint of the key an accepted token is bound to (`cnf.jkt`): every request needs the
   * DPoP scheme and a proof signed by that key. Null otherwise.
   */
  readonly binding: string | null;
  /** Null: the client is not limited. */
  readonly plan: PlanFact | null;
  readonly scopes: readonly string[] | null;
  readonly routes: readonly RouteFact[] | null;
}

// "42 s", "5 min", "3 h", "2 days": how far an instant is from now, to the unit that reads best.
function span(seconds: number): string {
  const s = Math.round(Math.abs(seconds));
  if (s < 120) return `${s} s`;
  if (s < 2 * 3600) return `${Math.round(s / 60)} min`;
  if (s < 2 * 86400) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}

function timeClaim(value: unknown, nowMs: number): unknown {
  if (typeof value !== "number" || !Number.isFinite(value)) return value;
  const date = new Date(value * 1000);
  if (Number.isNaN(date.getTime())) return value;
  const diff = value - nowMs / 1000;
  const relative =
    Math.round(diff) === 0 ? "now" : diff > 0 ? `in ${span(diff)}` : `${span(diff)} ago`;
  return { epoch: value, iso: date.toISOString(), relative };
}

// The claims gatehouse reads, in the order a reader checks them; absent ones are left out, save
// those whose absence decides (exp, the client) or answers a question (cnf).
function shownClaims(
  payload: JWTPayload,
  issuer: TrustedIssuer | undefined,
  nowMs: number,
): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  const names = ["iss", "sub", "aud"];
  if (issuer?.clientClaim !== undefined) names.push(issuer.clientClaim);
  else names.push("client_id", "azp");
  names.push("scope", "scp", "iat", "nbf", "exp", "jti");
  for (const name of names) {
    const value = payload[name];
    if (value === undefined && !["exp", "client_id", issuer?.clientClaim].includes(name)) continue;
    claims[name] = ["iat", "nbf", "exp"].includes(name) ? timeClaim(value, nowMs) : (value ?? null);
  }
  claims.cnf = payload.cnf !== undefined;
  return claims;
}

interface Decoded {
  readonly header: Record<string, unknown> | null;
  readonly payload: JWTPayload | null;
  readonly problem: string | null;
}

// The token read without verifying it, only to show what it says.
function decode(token: string): Decoded {
  let header: Record<string, unknown>;
  try {
    const { alg, typ, kid } = decodeProtectedHeader(token) as Record<string, unknown>;
    header = { alg: alg ?? null, typ: typ ?? null, kid: kid ?? null };
  } catch (error) {
    return { header: null, payload: null, problem: (error as Error).message };
  }
  try {
    return { header, payload: decodeJwt(token), problem: null };
  } catch (error) {
    return { header, payload: null, problem: (error as Error).message };
  }
}

// Which issuer gatehouse checks the token against, chosen by `iss` as the verifier chooses.
function issuerFact(
  config: Snapshot,
  payload: JWTPayload | null,
  trusted: TrustedIssuer | undefined,
): IssuerFact {
  const { tokens } = config;
  const unknown = (note: string): IssuerFact => ({
    name: null,
    audiences: null,
    algorithms: null,
    note,
  });
  if (payload === null) return unknown("unknown: the token's claims cannot be read");
  const { iss } = payload;
  if (iss === tokens.issuer && tokens.ownTokens) {
    return {
      name: OWN_ISSUER_NAME,
      audiences: [tokens.audience],
      algorithms: [tokens.keys.alg],
      note: `gatehouse's own (tokens.issuer ${tokens.issuer})`,
    };
  }
  if (trusted !== undefined) {
    return {
      name: trusted.name,
      audiences: trusted.audiences,
      algorithms: trusted.algorithms,
      note: `trusted issuer ${trusted.name} (${trusted.issuer})`,
    };
  }
  if (iss === undefined) return unknown("none: the token has no iss");
  const names = [
    ...(tokens.ownTokens ? [`${OWN_ISSUER_NAME} (${tokens.issuer})`] : []),
    ...tokens.trustedIssuers.map((issuer) => `${issuer.name} (${issuer.issuer})`),
  ];
  const own =
    iss === tokens.issuer
      ? "it names tokens.issuer, but this configuration issues no tokens of its own (every client is a trusted issuer's); "
      : "";
  return unknown(`none trusted: ${own}the trusted issuers are ${names.join(", ")}`);
}

async function revocationFact(
  config: Snapshot,
  token: VerifiedToken,
  nowMs: number,
): Promise<RevocationFact> {
  const { store, stateFile } = config.limits;
  const unchecked = (why: string): RevocationFact => ({
    checked: false,
    revoked: false,
    note: `not checked (${why})`,
  });
  if (store.kind === "redis") return unchecked("held in Redis, which this command does not read");
  if (stateFile === undefined) return unchecked("held by the running gatehouse");
  const read = await readStateFile(stateFile);
  if (read.kind === "missing") {
    return unchecked(`held by the running gatehouse; the state file ${stateFile} is not there`);
  }
  if (read.kind === "invalid") {
    return unchecked(`the state file ${stateFile} cannot be read: ${read.reason}`);
  }
  const revoked = read.marks.revoked.some(
    (mark) => mark.client === token.clientId && mark.id === token.jti && mark.endsAt > nowMs,
  );
  return {
    checked: true,
    revoked,
    note: revoked
      ? `revoked: its jti is in the state file ${stateFile}`
      : `not revoked as of the state file ${stateFile}, which a running gatehouse writes soon after each revocation`,
  };
}

function planFact(plan: Plan | undefined, dryRun: boolean): PlanFact | null {
  if (plan === undefined) return null;
  const limits = plan.rates.map(
    (rate) =>
      `${rate.name === DEFAULT_RATE_NAME ? "" : `${rate.name}: `}${rate.limit} per ${rate.window}`,
  );
  if (plan.quota !== undefined) limits.push(`quota ${plan.quota.limit} per ${plan.quota.period}`);
  return { name: plan.name, limits, dryRun };
}

function routeFact(route: Route, held: ReadonlySet<string>, bound: boolean): RouteFact {
  const rule = route.scopes;
  const needsBinding = route.dpopRequired && !bound;
  const base = { methods: [...route.methods], path: route.pattern, needsBinding };
  if (rule === undefined) return { ...base, allowed: !needsBinding, needs: null, missing: [] };
  const missing = rule.names.filter((name) => !held.has(name));
  // The scopes stage: `scopes` needs every one, `scopes_any` one of them.
  const granted = rule.every ? missing.length === 0 : missing.length < rule.names.length;
  return {
    ...base,
    allowed: granted && !needsBinding,
    needs: { every: rule.every, scopes: rule.names },
    missing: granted ? [] : missing,
  };
}

/** What `config` would decide for `token` at `nowMs`, and why. */
export async function reportToken(
  config: Snapshot,
  token: string,
  nowMs: number,
): Promise<TokenReport> {
  const { tokens } = config;
  const decoded = decode(token);
  const iss = decoded.payload?.iss;
  const trusted =
    typeof iss === "string" && !(iss === tokens.issuer && tokens.ownTokens)
      ? new Map(tokens.trustedIssuers.map((issuer) => [issuer.issuer, issuer])).get(iss)
      : undefined;
  const issuer = issuerFact(config, decoded.payload, trusted);
  const keys = trusted === undefined ? undefined : await fetchOnce(trusted);
  const kid = decoded.header?.kid;
  const key: KeyFact =
    trusted !== undefined && keys !== undefined
      ? providerKeyFact(trusted, kid, keys)
      : issuer.name === OWN_ISSUER_NAME
        ? ownKeyFact(config, kid)
        : { found: null, note: "not looked up: the token names no issuer gatehouse trusts" };
  const facts = {
    notJwt: decoded.problem,
    header: decoded.header,
    claims: decoded.payload === null ? null : shownClaims(decoded.payload, trusted, nowMs),
    issuer,
    key,
  };
  const refused = (verdict: Verdict, revocation: RevocationFact | null = null): TokenReport => ({
    verdict,
    ...facts,
    revocation,
    client: null,
    plan: null,
    binding: null,
    scopes: null,
    routes: null,
  });

  const malformed = syntaxRefusal(token);
  if (malformed !== undefined) return refused(malformed);
  if (issuer.name === OWN_ISSUER_NAME && tokens.ephemeralKey) {
    const message = `gatehouse's own tokens cannot be checked offline without ${tokens.keys.alg === "HS256" ? "tokens.signing.secret_env" : "tokens.signing.key_file"}`;
    return refused({ outcome: "unchecked", message });
  }
  // The verifier picks the issuer by `iss` as `trusted` was picked: it asks for no other's keys.
  const verifier = createTokenVerifier(tokens, keys === undefined ? undefined : () => keys.set);
  let verified: VerifiedToken;
  try {
    verified = await verifier.verify(token, nowMs);
  } catch (error) {
    if (!(error instanceof TokenRejected || error instanceof KeysUnavailable)) throw error;
    return refused(refusalOf(error));
  }
  const own = verified.issuer === OWN_ISSUER_NAME;
  // What the authenticate stage checks after the verifier, for gatehouse's own tokens only.
  if (own && !tokens.clients.ids.has(verified.clientId)) return refused(STAGE_REFUSALS.clientGone);
  const revocation = own ? await revocationFact(config, verified, nowMs) : null;
  if (revocation?.revoked === true) return refused(STAGE_REFUSALS.revoked, revocation);

  const { limits } = config;
  const plan = clientPlan(limits.clients, limits.issuers, verified.clientKey, verified.issuer);
  const held = verified.scopes.names;
  return {
    verdict: { outcome: "accepted" },
    ...facts,
    revocation,
    client: {
      id: verified.clientId,
      issuer: verified.issuer,
      key: verified.clientKey,
      listed: own || trusted?.clients.has(verified.clientId) === true,
    },
    binding: verified.jkt ?? null,
    plan: planFact(plan, limits.dryRun),
    scopes: [...held],
    routes: config.routes.routes
      .filter((route) => route.auth === "bearer")
      .map((route) => routeFact(route, held, verified.jkt !== undefined)),
  };
}
