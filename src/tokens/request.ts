/**
 * Reading a token request (RFC 6749 §4.4.2): HTTP Basic client credentials and the body's fields.
 * Pure functions; every refusal is a GatehouseError with an RFC 6749 §5.2 code and a fixed
 * description, never one that echoes the client's input.
 */
import type { IncomingMessage } from "node:http";
import { GatehouseError } from "../http/errors.js";
import { fieldLines } from "../http/field-lines.js";
import { formDecode } from "../http/form-decode.js";
import { topLevelNames } from "./json-members.js";

/** Client credentials as presented, before they are checked. */
export interface ClientCredentials {
  readonly id: string;
  readonly secret: string;
}

/** A client assertion as presented (RFC 7521 §4.2), before it is checked. */
export interface AssertionCredentials {
  readonly assertion: string;
  /** The body's `client_id`, which must then name the assertion's `sub` (RFC 7521 §4.2). */
  readonly claimedId: string | undefined;
}

/**
 * The fields of a token or revocation request that gatehouse reads; empty values count as
 * absent.
 */
export interface TokenRequestFields {
  readonly grantType: string | undefined;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  /** RFC 6749 §3.3, space-separated. */
  readonly scope: string | undefined;
  /** RFC 8707 §2: the one parameter that may repeat, in the order sent. */
  readonly resources: readonly string[];
  readonly clientAssertionType: string | undefined;
  readonly clientAssertion: string | undefined;
  /** RFC 7009 §2.1: the token to revoke. */
  readonly token: string | undefined;
}

/** The body's media types the endpoint reads. */
export type BodyType = "form" | "json";

const textDecoder = new TextDecoder("utf-8", { fatal: true });

function invalidRequest(message: string): GatehouseError {
  return new GatehouseError(400, "invalid_request", message);
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * Reads Basic credentials (RFC 7617 §2 with RFC 6749 §2.3.1): base64 of `id:secret`, split at the
 * first colon, each side form-urldecoded. Undefined when they are malformed.
 */
export function parseBasicCredentials(token68: string): ClientCredentials | undefined {
  if (!BASE64.test(token68) || token68.length % 4 !== 0) return undefined;
  let decoded: string;
  try {
    decoded = textDecoder.decode(Buffer.from(token68, "base64"));
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(":");
  if (colon === -1) return undefined;
  const id = formDecode(decoded.slice(0, colon));
  const secret = formDecode(decoded.slice(colon + 1));
  if (id === undefined || secret === undefined || id === "" || secret === "") return undefined;
  return { id, secret };
}

/** The body's type from Content-Type, or undefined when it is neither form nor JSON. */
export function bodyType(contentType: string | undefined): BodyType | undefined {
  if (contentType === undefined) return undefined;
  const semicolon = contentType.indexOf(";");
  const media = (semicolon === -1 ? contentType : contentType.slice(0, semicolon))
    .trim()
    .toLowerCase();
  if (media === "application/x-www-form-urlencoded") return "form";
  if (media === "application/json") return "json";
  return undefined;
}

// The names read from a body; the upper-case aliases are the same fields, as some existing
// clients send them.
const FIELD_NAMES: Readonly<Record<string, keyof TokenRequestFields>> = {
  grant_type: "grantType",
  client_id: "clientId",
  CLIENT_ID: "clientId",
  client_secret: "clientSecret",
  CLIENT_SECRET: "clientSecret",
  scope: "scope",
  resource: "resources",
  client_assertion_type: "clientAssertionType",
  client_assertion: "clientAssertion",
  token: "token",
};

// The fields that carry a credential: never in the request URI (RFC 6749 §2.3.1).
const CREDENTIAL_FIELDS: ReadonlySet<keyof TokenRequestFields> = new Set([
  "clientId",
  "clientSecret",
  "clientAssertion",
]);

/** Collects the known fields; a field given twice (an alias counts) is refused (RFC 6749 §3.2). */
function collect(pairs: Iterable<[string, string]>): TokenRequestFields {
  const fields: Record<string, string | undefined> = {};
  const resources: string[] = [];
  const seen = new Set<string>();
  for (const [name, value] of pairs) {
    const field = Object.hasOwn(FIELD_NAMES, name) ? FIELD_NAMES[name] : undefined;
    if (field === undefined) continue;
    // RFC 8707 §2: several resources are several `resource` parameters; an empty one is omitted.
    if (field === "resources") {
      if (value !== "") resources.push(value);
      continue;
    }
    if (seen.has(field)) throw invalidRequest("a parameter is included more than once");
    seen.add(field);
    // RFC 6749 §3.2: a parameter sent without a value is treated as omitted.
    if (value !== "") fields[field] = value;
  }
  return {
    grantType: fields.grantType,
    clientId: fields.clientId,
    clientSecret: fields.clientSecret,
    scope: fields.scope,
    resources,
    clientAssertionType: fields.clientAssertionType,
    clientAssertion: fields.clientAssertion,
    token: fields.token,
  };
}

function* formPairs(text: string): Generator<[string, string]> {
  for (const part of text.split("&")) {
    if (part === "") continue;
    const equals = part.indexOf("=");
    const name = formDecode(equals === -1 ? part : part.slice(0, equals));
    const value = formDecode(equals === -1 ? "" : part.slice(equals + 1));
    if (name === undefined || value === undefined) {
      throw invalidRequest("the form body is not valid UTF-8 form-urlencoded data");
    }
    yield [name, value];
  }
}

function jsonPairs(text: string): Array<[string, string]> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw invalidRequest("the JSON body does not parse");
  }
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    throw invalidRequest("the JSON body must be an object");
  }
  // RFC 6749 §3.2: no parameter more than once; in JSON, JSON.parse would keep only the last.
  const names = topLevelNames(text);
  if (new Set(names).size !== names.length) {
    throw invalidRequest("the JSON body names a member more than once");
  }
  const pairs: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(data)) {
    if (!Object.hasOwn(FIELD_NAMES, name)) continue;
    // JSON's form of a repeated `resource`: an array of strings.
    const values = name === "resource" && Array.isArray(value) ? (value as unknown[]) : [value];
    for (const one of values) {
      if (typeof one !== "string") throw invalidRequest("token request parameters must be strings");
      pairs.push([name, one]);
    }
  }
  return pairs;
}

/** Reads the token request's fields from a body of `type`; an empty body has none. */
export function parseTokenBody(body: Buffer, type: BodyType | undefined): TokenRequestFields {
  if (body.length === 0) return collect([]);
  if (type === undefined) {
    throw invalidRequest("the body must be application/x-www-form-urlencoded or application/json");
  }
  let text: string;
  try {
    text = textDecoder.decode(body);
  } catch {
    throw invalidRequest("the body is not valid UTF-8");
  }
  return collect(type === "form" ? formPairs(text) : jsonPairs(text));
}

/** Whether a query string carries client credentials (RFC 6749 §2.3.1: never in the URI). */
export function queryHasCredentials(query: string | null): boolean {
  if (query === null || query === "") return false;
  for (const part of query.split("&")) {
    const equals = part.indexOf("=");
    const name = formDecode(equals === -1 ? part : part.slice(0, equals));
    if (name === undefined || !Object.hasOwn(FIELD_NAMES, name)) continue;
    const field = FIELD_NAMES[name];
    if (field !== undefined && CREDENTIAL_FIELDS.has(field)) return true;
  }
  return false;
}

/** What the Authorization header holds for the token endpoint. */
export type HeaderCredentials = ClientCredentials | undefined | "malformed" | "repeated";

/** Basic credentials from the Authorization header, undefined without one, or why not. */
export function headerCredentials(req: IncomingMessage): HeaderCredentials {
  const lines = fieldLines(req.rawHeaders, "authorization");
  if (lines === 0) return undefined;
  if (lines > 1) return "repeated";
  const value = req.headers.authorization ?? "";
  const space = value.indexOf(" ");
  // RFC 9110 §11.1: the scheme is case-insensitive. Any other scheme is an unsupported method.
  if (space === -1 || value.slice(0, space).toLowerCase() !== "basic") return "malformed";
  return parseBasicCredentials(value.slice(space + 1).trim()) ?? "malformed";
}
