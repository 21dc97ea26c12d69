/**
 * The oidc-provider example of docs/identity-providers.md, run as the chapter has it: its
 * JavaScript block as `node provider.mjs` on a free port, its YAML block as gatehouse's
 * configuration with the provider's and the upstream's addresses put in. A token the provider
 * issues by client credentials for the API (RFC 8707), a JWT (RFC 9068), reaches the upstream
 * with X-Client-Id; the same provider without its `defaultResource` line gives a client that
 * names no resource an opaque token, which gatehouse refuses (401 invalid_token).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import t from "tap";
import { decodeProtectedHeader } from "jose";
import { eventually, json, send } from "./helpers/client.js";
import { readManual, section } from "./helpers/docs.js";
import { startTestGatehouse } from "./helpers/gatehouse.js";
import { metric } from "./helpers/metrics.js";
import { refusingPort } from "./helpers/ports.js";
import { startUpstream } from "./helpers/upstream.js";

const example = section(readManual("docs/identity-providers.md"), "oidc-provider");
const block = (language: string): string =>
  new RegExp("```" + language + "\\n([\\s\\S]*?)```").exec(example)?.[1] ?? "";
const PROVIDER = block("js");
const GATEHOUSE = block("yaml");

// What the chapter's blocks name: the API, the client, the addresses its reader runs them on.
const API = "https://api.example.com";
const CLIENT = { id: "billing-service", secret: "billing-service-secret" };
const PROVIDER_AT = "http://127.0.0.1:4000";
const UPSTREAM_AT = "http://127.0.0.1:3000";
const DEFAULT_RESOURCE = /^ *defaultResource: .*\n/m;

t.ok(PROVIDER.includes(`"${CLIENT.secret}"`), "the provider block registers the client");
t.ok(DEFAULT_RESOURCE.test(PROVIDER), "the provider block sets defaultResource");
t.ok(GATEHOUSE.includes(PROVIDER_AT) && GATEHOUSE.includes(UPSTREAM_AT), "the YAML names both");

/**
 * Runs `code` as `node provider.mjs` would, from the repository's root (where oidc-provider is
 * installed, as in the reader's project) with PORT set; resolves once it says it listens.
 */
async function runProvider(code: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--input-type=module", "--eval", code], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const listening = new Promise<void>((ready, failed) => {
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (output.includes(`oidc-provider at http://127.0.0.1:${port}`)) ready();
    });
    child.stderr.on("data", (chunk: Buffer) => void (output += chunk.toString("utf8")));
    child.once("exit", (code) => failed(new Error(`the provider exited (${code}): ${output}`)));
  });
  await listening;
  return child;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill();
  await exited;
}

/** A client credentials token from the provider, with `resource` when given. */
async function token(issuer: string, resource?: string): Promise<string> {
  const body = new URLSearchParams({ grant_type: "client_credentials", scope: "items:read" });
  if (resource !== undefined) body.set("resource", resource);
  const credentials = Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString("base64");
  const answer = await fetch(`${issuer}/token`, {
    method: "POST",
    body,
    headers: { authorization: `Basic ${credentials}` },
  });
  const parsed = (await answer.json()) as Record<string, unknown>;
  if (typeof parsed.access_token !== "string") {
    throw new Error(`the provider refused: ${JSON.stringify(parsed)}`);
  }
  return parsed.access_token;
}

const port = await refusingPort();
const issuer = `http://127.0.0.1:${port}`;
let provider = await runProvider(PROVIDER, port);
t.teardown(() => stop(provider));
const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  GATEHOUSE.replaceAll(PROVIDER_AT, issuer).replaceAll(UPSTREAM_AT, upstream.url),
);
t.teardown(() => g.close());

const items = (bearer: string) =>
  send(`${g.url}/v1/items`, { headers: { authorization: `Bearer ${bearer}` } });

t.test("the provider's JWT for the API reaches the upstream with X-Client-Id", async (t) => {
  const fetched = () =>
    metric(g, "gatehouse_issuer_keys_fetch_total", { issuer: "local", result: "ok" });
  t.ok(await eventually(async () => (await fetched()) >= 1), "keys found by discovery");
  for (const resource of [API, undefined]) {
    const name = resource === undefined ? "no resource: defaultResource" : "resource named";
    const jwt = await token(issuer, resource);
    t.match(decodeProtectedHeader(jwt), { typ: "at+jwt", alg: "RS256" }, `${name}: a JWT`);
    const before = upstream.received.length;
    const answer = await items(jwt);
    t.equal(answer.status, 200, name);
    t.match(
      upstream.received[before]?.headers,
      { "x-client-id": CLIENT.id, "x-client-issuer": "local", "x-client-scopes": "items:read" },
      name,
    );
  }
});

t.test("without defaultResource, its opaque token is refused: 401 invalid_token", async (t) => {
  await stop(provider);
  // The same provider and port, so gatehouse still trusts the issuer of the opaque token.
  provider = await runProvider(PROVIDER.replace(DEFAULT_RESOURCE, ""), port);
  const opaque = await token(issuer);
  t.notOk(opaque.includes("."), "not a JWT");
  const before = upstream.received.length;
  const answer = await items(opaque);
  t.equal(answer.status, 401);
  t.equal(json(answer).error, "invalid_token");
  t.match(answer.headers["www-authenticate"], /error="invalid_token"/);
  t.equal(upstream.received.length, before, "the upstream never sees it");
  const jwt = await token(issuer, API);
  t.equal((await items(jwt)).status, 200, "its JWT passes: a new key, fetched for its new kid");
});
