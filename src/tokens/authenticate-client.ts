/**
 * Authenticating the client of a token or revocation request (RFC 6749 §2.3, RFC 7009 §2.1): the
 * body read within its bounds, one authentication method chosen (HTTP Basic, a secret in the
 * body, or a client assertion: RFC 7523 §2.2), the credentials checked within the verification
 * bound, and every failure counted against the client's address (`tokens.failure_limit`).
 */
import type { ErrorCode } from "../http/error-codes.js";
import { GatehouseError } from "../http/errors.js";
import type { AttemptDecision, FailureDecision, FailureLimiter } from "../limits/failures.js";
import { HANDLED, type Reply, type RequestContext } from "../core/context.js";
import type { Services } from "../core/services.js";
import { AssertionRejected, JWT_BEARER_ASSERTION } from "./assertion.js";
import { VERIFY_WAIT_MS, type ClientAuthenticator } from "./client-auth.js";
import type { TokenMarks } from "./marks.js";
import { readBody } from "./read-body.js";
import {
  bodyType,
  parseTokenBody,
  type AssertionCredentials,
  type ClientCredentials,
  type HeaderCredentials,
  type TokenRequestFields,
} from "./request.js";
import type { TokenSettings } from "./settings.js";
import type { TokenVerifier } from "./verify.js";

/** Largest token or revocation request body read; a larger one gets 413 before it is read. */
export const MAX_TOKEN_BODY_BYTES = 8 * 1024;

/** RFC 6749 §5.1: token responses and their errors must not be cached. */
export const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" } as const;
const BASIC_CHALLENGE = 'Basic realm="gatehouse"';

/** An RFC 6749 §5.2 error answer, never cached. */
export function oauthError(
  status: number,
  code: ErrorCode,
  description: string,
  headers: Readonly<Record<string, string>> = {},
): Reply {
  return {
    status,
    headers: { ...NO_STORE, ...headers },
    body: { error: code, error_description: description },
  };
}

// One answer for an unknown id, a wrong secret, malformed Basic or none at all, so an
// unknown id cannot be told from a wrong secret.
// RFC 9110 §15.5.2: a 401 always carries a challenge, so it is sent whichever method was used.
/** The one answer to a client that did not authenticate. */
export const INVALID_CLIENT = oauthError(401, "invalid_client", "client authentication failed", {
  "www-authenticate": BASIC_CHALLENGE,
});
/** A body over MAX_TOKEN_BODY_BYTES. */
export const TOO_LARGE = oauthError(
  413,
  "payload_too_large",
  `the token request body must be at most ${MAX_TOKEN_BODY_BYTES} bytes`,
  { connection: "close" },
);
/** Two Authorization header lines. */
export const TWO_AUTHORIZATIONS = oauthError(
  400,
  "invalid_request",
  "the request has more than one Authorization header",
);
const TWO_METHODS = oauthError(
  400,
  "invalid_request",
  "the client must use one authentication method, Basic or the body, not both",
);
const ASSERTION_AND_SECRET = oauthError(
  400,
  "invalid_request",
  "the client must use one authentication method: a client assertion, Basic or a secret, not two",
);
// RFC 7521 §4.2.1: an assertion of a type not served is invalid_client.
const OTHER_ASSERTION_TYPE = assertionRefused(
  `client_assertion_type must be ${JWT_BEARER_ASSERTION}`,
);
const HALF_AN_ASSERTION = oauthError(
  400,
  "invalid_request",
  "client_assertion and client_assertion_type go together",
);

/**
 * A 503 `temporarily_unavailable` saying what could not be done now. RFC 6749 §4.1.2.1 defines
 * the code for the authorization endpoint; the token and revocation endpoints answer it in the same
 * sense, in §5.2's format. RFC 9110 §10.2.3: retry after a second.
 */
export function retryShortly(what: string): Reply {
  return oauthError(503, "temporarily_unavailable", `${what}; retry after 1 second`, {
    "retry-after": "1",
  });
}

const TEMPORARILY_UNAVAILABLE = retryShortly("too many client authentications are being checked");
const CROWDED = retryShortly(
  "the client authentications being checked for this address hold its failure budget",
);
// Redis holds the used assertion ids and cannot be reached under `on_outage: closed`.
const REPLAYS_UNAVAILABLE = retryShortly("used client assertions cannot be checked now");

function rateLimited(decision: FailureDecision): Reply {
  return oauthError(
    429,
    "rate_limited",
    `too many failed client authentications; retry after ${decision.retryAfterSeconds} seconds`,
    { "retry-after": String(decision.retryAfterSeconds) },
  );
}

/** What a request authenticates with: a secret or an assertion. */
type Credentials = ClientCredentials | AssertionCredentials;

/** The assertion of a private_key_jwt request (RFC 7521 §4.2), or the answer to a bad one. */
function assertionCredentials(
  basic: ClientCredentials | undefined,
  fields: TokenRequestFields,
): AssertionCredentials | Reply {
  // RFC 6749 §2.3: one authentication method per request.
  if (basic !== undefined || fields.clientSecret !== undefined) return ASSERTION_AND_SECRET;
  const { clientAssertion, clientAssertionType } = fields;
  if (clientAssertion === undefined || clientAssertionType === undefined) return HALF_AN_ASSERTION;
  if (clientAssertionType !== JWT_BEARER_ASSERTION) return OTHER_ASSERTION_TYPE;
  return { assertion: clientAssertion, claimedId: fields.clientId };
}

/** The credentials to check, or the answer when the request cannot be authenticated. */
function chooseCredentials(
  basic: ClientCredentials | undefined,
  fields: TokenRequestFields,
): Credentials | Reply {
  if (fields.clientAssertion !== undefined || fields.clientAssertionType !== undefined) {
    return assertionCredentials(basic, fields);
  }
  if (basic !== undefined) {
    // RFC 6749 §2.3: a client MUST NOT use more than one authentication method.
    if (fields.clientSecret !== undefined) return TWO_METHODS;
    if (fields.clientId !== undefined && fields.clientId !== basic.id) return TWO_METHODS;
    return basic;
  }
  if (fields.clientId === undefined || fields.clientSecret === undefined) return INVALID_CLIENT;
  return { id: fields.clientId, secret: fields.clientSecret };
}

/** The failure limiter's store cannot be reached under `on_outage: closed`. */
export const LIMITS_UNAVAILABLE = new GatehouseError(
  503,
  "limits_unavailable",
  "the failure limiter cannot be reached; try again shortly",
  { "retry-after": "1" },
);

/** What answering a token request needs, built once with the stage. */
export interface Endpoint {
  readonly settings: TokenSettings;
  readonly failures: FailureLimiter;
  readonly clients: ClientAuthenticator;
  readonly marks: TokenMarks;
  /** Verifies the tokens sent for revocation. */
  readonly verifier: TokenVerifier;
  readonly services: Services;
  /** Milliseconds the body may take to arrive once it is wanted. */
  readonly bodyMs: number;
  /** The answer when the body is not received within `bodyMs`. */
  readonly bodyTimeout: Reply;
}

/**
 * A call to the failure limiter, whose store is the only part that may fail for reasons outside
 * the request (Redis): it throws only under `on_outage: closed` (under `local` and `open` it
 * answers), and is then LIMITS_UNAVAILABLE.
 */
export async function limiterCall<T>(
  endpoint: Pick<Endpoint, "services">,
  call: Promise<T>,
): Promise<T> {
  try {
    return await call;
  } catch (error) {
    endpoint.services.log.error({ err: error }, "failure limiter unavailable");
    throw LIMITS_UNAVAILABLE;
  }
}

// An assertion's refusal names the rule it broke (RFC 6749 §5.2 error_description): a client's
// developer needs it and a guesser gains nothing; a secret's refusal stays INVALID_CLIENT.
function assertionRefused(description: string): Reply {
  return oauthError(401, "invalid_client", description, { "www-authenticate": BASIC_CHALLENGE });
}

// Counts a failed client authentication and logs it with the client it named, if any (never a
// secret or an assertion), then answers it.
function fail(
  endpoint: Endpoint,
  ctx: RequestContext,
  reason: string,
  reply: Reply,
  client?: string,
): Reply {
  endpoint.services.metrics.authFailures.inc({ reason });
  endpoint.services.log.info(
    { requestId: ctx.requestId, client, reason },
    "client authentication refused",
  );
  return reply;
}

/** A request's credentials, with the fields of its body. */
interface Received {
  readonly credentials: Credentials;
  readonly fields: TokenRequestFields;
}

/** Checks a request's fields before its client is authenticated; a Reply refuses it. */
export type FieldCheck = (fields: TokenRequestFields) => Reply | undefined;

/**
 * Reads the request's body: the credentials to check (from the body, or the Basic ones) and the
 * fields, or the answer when there are none to check, or HANDLED when the client went away.
 */
async function receiveCredentials(
  endpoint: Endpoint,
  ctx: RequestContext,
  basic: ClientCredentials | undefined,
  check: FieldCheck,
): Promise<Received | Reply | typeof HANDLED> {
  const { req } = ctx;
  // Only now is the body wanted (RFC 9110 §10.1.1): a refused request never got 100 Continue.
  if (req.headers.expect !== undefined) ctx.res.writeContinue();
  const body = await readBody(req, MAX_TOKEN_BODY_BYTES, endpoint.bodyMs, endpoint.services.clock);
  if (body === "aborted") {
    ctx.res.destroy();
    return HANDLED;
  }
  if (body === "too_large") return TOO_LARGE;
  if (body === "timeout") return endpoint.bodyTimeout;
  const fields = parseTokenBody(body, bodyType(req.headers["content-type"]));
  const refused = check(fields);
  if (refused !== undefined) return refused;
  const credentials = chooseCredentials(basic, fields);
  return "status" in credentials ? credentials : { credentials, fields };
}

// An assertion that verified: its jti is accepted once (RFC 7523 §3 item 7), and a client_id in
// the body must name its subject (RFC 7521 §4.2). An AssertionRejected says why it was refused.
async function checkAssertion(
  endpoint: Endpoint,
  credentials: AssertionCredentials,
  nowMs: number,
): Promise<{ readonly clientId: string } | AssertionRejected | "busy" | Reply> {
  const checked = await endpoint.clients.checkAssertion(credentials.assertion, nowMs);
  if (checked === "busy" || checked instanceof AssertionRejected) return checked;
  if (credentials.claimedId !== undefined && credentials.claimedId !== checked.clientId) {
    const message = "client_id must name the client assertion's sub";
    return new AssertionRejected("other_client", message, checked.clientId);
  }
  const use = await endpoint.marks.firstUse(checked.clientId, checked.jti, checked.untilMs, nowMs);
  if (use === "replayed") {
    const message = "the client assertion's jti was used before; sign a new one for each request";
    return new AssertionRejected("replay", message, checked.clientId);
  }
  if (use === "full") return "busy";
  if (use === "unavailable") return REPLAYS_UNAVAILABLE;
  return { clientId: checked.clientId };
}

/** Who authenticated, and the fields of the request. */
export interface Authenticated {
  readonly clientId: string;
  readonly fields: TokenRequestFields;
}

/** A failed guess: why (for metrics and the log), its answer, and the listed client it named. */
interface Refusal {
  readonly reason: string;
  readonly reply: Reply;
  readonly client?: string | undefined;
}

/** The client a checked credential names, a failed guess, or the answer. */
type Checked = { readonly clientId: string } | Refusal | "busy" | Reply;

// Checks the credentials of an attempt already counted. "busy" (no turn for the check, a full
// replay record) and a Reply (Redis down) are no failed guess; a Refusal is one.
async function checkCredentials(endpoint: Endpoint, credentials: Credentials): Promise<Checked> {
  const { settings, services } = endpoint;
  if ("assertion" in credentials) {
    const checked = await checkAssertion(endpoint, credentials, services.now());
    if (!(checked instanceof AssertionRejected)) return checked;
    const reply = assertionRefused(checked.message);
    return { reason: `assertion_${checked.rule}`, reply, client: checked.client };
  }
  const checked = await endpoint.clients.check(credentials.id, credentials.secret);
  if (checked === "busy") return "busy";
  if (checked === "accepted") return { clientId: credentials.id };
  const listed = settings.clients.secrets.has(credentials.id);
  // Per client id, so an operator sees a guessing campaign that no address's count shows;
  // ids the config does not list share one label, so a guesser cannot grow the label set.
  services.metrics.tokenFailures.inc({ client: listed ? credentials.id : "unknown" });
  const reason = listed ? "wrong_secret" : "unknown_client";
  return { reason, reply: INVALID_CLIENT, client: listed ? credentials.id : undefined };
}

// Whether `credentials` are a secret that matched before (counted as `remembered`).
function recalled(endpoint: Endpoint, credentials: Credentials): boolean {
  return "secret" in credentials && endpoint.clients.recall(credentials.id, credentials.secret);
}

// Whether a locked address's request, whose body named no credentials to check and whose Basic
// secret is not remembered, gets 429 instead of its answer, as it would have before its body was
// read; a body too large or too slow keeps its answer, which closes the connection.
function refusedWhenLocked(endpoint: Endpoint, received: Reply | typeof HANDLED): boolean {
  return received !== HANDLED && received !== TOO_LARGE && received !== endpoint.bodyTimeout;
}

/**
 * Counts an attempt from the request's address: allowed, or the answer. While the attempts in
 * flight from the address hold the rest of its budget, it waits for them to settle (a secret
 * remembered meanwhile needs no attempt) up to the verification's wait, then answers 503:
 * attempts still being checked never make a correct secret a 429.
 */
async function countAttempt(
  endpoint: Endpoint,
  ctx: RequestContext,
  credentials: Credentials,
): Promise<AttemptDecision | "remembered" | Reply> {
  const { failures, services } = endpoint;
  const ip = ctx.client.address;
  const deadline = services.clock.monotonic() + VERIFY_WAIT_MS;
  for (;;) {
    // A secret that matched before is no guess: it is not counted, so a client's concurrent token
    // requests from one address never count against that address's failure limit.
    if (recalled(endpoint, credentials)) return "remembered";
    const decision = await limiterCall(endpoint, failures.attempt(ip));
    if (decision.allowed) return decision;
    if (!decision.crowded) {
      services.log.warn({ requestId: ctx.requestId, ip }, "client authentication failure limit");
      return fail(endpoint, ctx, "rate_limited", rateLimited(decision));
    }
    const left = deadline - services.clock.monotonic();
    if (left <= 0) return fail(endpoint, ctx, "crowded", CROWDED);
    // Tried again after the wait even when nothing settled here: the attempts in flight may be
    // another replica's, which no settle in this process announces.
    await failures.settled(ip, left);
  }
}

/**
 * Authenticates the client of a token or revocation request, counting a failure against its
 * address: the client and the request's fields, or the answer.
 */
export async function authenticateClient(
  endpoint: Endpoint,
  ctx: RequestContext,
  basic: Exclude<HeaderCredentials, "repeated">,
  check: FieldCheck,
): Promise<Authenticated | Reply | typeof HANDLED> {
  const { failures } = endpoint;
  // Beyond the limit every attempt from the address is refused, a malformed one too
  // (RFC 6749 §2.3.1); attempts are counted per address only, so naming a client locks no one out.
  const early = await limiterCall(endpoint, failures.peek(ctx.client.address));
  const locked = early.allowed ? undefined : rateLimited(early);
  // Except a secret remembered as correct: no guess, and no work the limit is there to bound, so
  // the other failures of an address that many clients share never refuse it. A Basic secret is
  // known now; a secret in the body once the body is read.
  const known = locked !== undefined && typeof basic === "object" && recalled(endpoint, basic);
  if (locked !== undefined && basic !== undefined && !known) {
    return fail(endpoint, ctx, "rate_limited", locked);
  }
  if (basic === "malformed") return fail(endpoint, ctx, "malformed_credentials", INVALID_CLIENT);
  const received = await receiveCredentials(endpoint, ctx, basic, check);
  if (received === HANDLED || !("credentials" in received)) {
    if (locked !== undefined && !known && refusedWhenLocked(endpoint, received)) {
      return fail(endpoint, ctx, "rate_limited", locked);
    }
    if (received === INVALID_CLIENT) return fail(endpoint, ctx, "no_credentials", received);
    if (received === OTHER_ASSERTION_TYPE) return fail(endpoint, ctx, "assertion_type", received);
    return received;
  }
  const { credentials, fields } = received;
  // From a locked address, anything but a remembered secret finds the limit here and gets 429.
  const decision = known ? "remembered" : await countAttempt(endpoint, ctx, credentials);
  if (decision === "remembered") {
    ctx.clientId = (credentials as ClientCredentials).id;
    return { clientId: ctx.clientId, fields };
  }
  if ("status" in decision) return decision;
  let checked: Checked | undefined;
  try {
    checked = await checkCredentials(endpoint, credentials);
  } finally {
    // Settled whatever happened, so that no attempt stays in flight: a failed guess stays
    // counted, anything else (a success, or no check made) is taken back.
    const failed = typeof checked === "object" && "reason" in checked;
    await limiterCall(endpoint, failures.settle(decision, failed));
  }
  if (checked === "busy") return TEMPORARILY_UNAVAILABLE;
  if ("reason" in checked)
    return fail(endpoint, ctx, checked.reason, checked.reply, checked.client);
  if ("status" in checked) return checked;
  ctx.clientId = checked.clientId;
  return { clientId: checked.clientId, fields };
}
