/** Token-endpoint helpers: client entries with real secret hashes, Basic headers, token requests. */
import { hashSecret } from "../../src/tokens/secrets.js";
import { send, type ClientResponse } from "./client.js";

/** A client as the tests know it: its id and its plain secret. */
export interface TestClient {
  readonly id: string;
  readonly secret: string;
  /** More YAML for the client's entry, such as `scopes: [a]`, one key per line. */
  readonly extra?: readonly string[];
}

/** The `clients:` YAML section for `clients`, with hashes made by the real hash-secret code. */
export async function clientsYaml(clients: readonly TestClient[]): Promise<string> {
  const entries = await Promise.all(
    clients.map(
      async (client) =>
        `  - id: ${client.id}\n    secret_hash: "${await hashSecret(client.secret)}"\n` +
        (client.extra ?? []).map((line) => `    ${line}\n`).join(""),
    ),
  );
  return `clients:\n${entries.join("")}`;
}

/** application/x-www-form-urlencoded encoding of one value (RFC 6749 Appendix B). */
export function formEncode(value: string): string {
  return new URLSearchParams([["", value]]).toString().slice(1);
}

/** An RFC 6749 §2.3.1 Basic header: id and secret form-encoded, then base64. */
export function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${formEncode(id)}:${formEncode(secret)}`).toString("base64")}`;
}

/** A form body from pairs, each side form-encoded. */
export function form(pairs: ReadonlyArray<[string, string]>): string {
  return pairs.map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&");
}

/** A token endpoint answer with its body parsed when it is JSON. */
export interface TokenAnswer extends ClientResponse {
  readonly json: Record<string, unknown>;
}

/** POSTs to the token endpoint; `form` bodies get the form Content-Type unless headers say else. */
export async function postToken(
  url: string,
  options: { headers?: Record<string, string>; body?: string | Buffer; method?: string } = {},
): Promise<TokenAnswer> {
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    ...options.headers,
  };
  const response = await send(`${url}/oauth/token`, {
    method: options.method ?? "POST",
    headers,
    body: options.body ?? "",
  });
  const text = response.body.toString("utf8");
  let json: Record<string, unknown> = {};
  if ((response.headers["content-type"] ?? "").startsWith("application/json") && text !== "") {
    json = JSON.parse(text) as Record<string, unknown>;
  }
  return { ...response, json };
}

/** The claims of a compact JWS, read without verifying it. */
export function claimsOf(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8")) as Record<
    string,
    unknown
  >;
}

/**
 * Obtains a token for `client` with client_secret_post, with `more` parameters (`scope`,
 * `resource`) after the credentials; fails the caller when refused.
 */
export async function obtainToken(
  url: string,
  client: TestClient,
  more: ReadonlyArray<[string, string]> = [],
): Promise<string> {
  const answer = await postToken(url, {
    body: form([
      ["grant_type", "client_credentials"],
      ["client_id", client.id],
      ["client_secret", client.secret],
      ...more,
    ]),
  });
  if (answer.status !== 200) throw new Error(`token request refused: ${answer.status}`);
  return answer.json.access_token as string;
}

/**
 * `token` with its signature spoiled: same form and key id, a signature that does not verify (the
 * costly kind of bad token). A character early in the signature is changed: the last one also
 * carries padding bits.
 */
export function forged(token: string): string {
  const at = token.lastIndexOf(".") + 2;
  return `${token.slice(0, at)}${token[at] === "A" ? "B" : "A"}${token.slice(at + 1)}`;
}
