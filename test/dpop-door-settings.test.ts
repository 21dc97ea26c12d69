/**
 * DPoP at the door under the settings around it, through real sockets: invalid proofs count
 * against `tokens.failure_limit`; the URL a proof's htu must name
 * behind a trusted proxy (its X-Forwarded-Proto) and under an http(s) `tokens.audience` (its
 * origin, whatever the Host); server nonces (RFC 9449 §8 and §9) from one time slot to the next;
 * the RFC 9728 document's DPoP members, and the challenges that point to it.
 */
import { randomUUID } from "node:crypto";
import t from "tap";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";
import { BEARER_REFUSALS } from "../src/tokens/refusal-reasons.js";
import { json, send } from "./helpers/client.js";
import {
  dpopHeaders,
  dpopKey,
  observed,
  ownSigningKey,
  proof,
  refusal,
  refusedAs,
  type ProofFor,
} from "./helpers/dpop.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const NOW_S = NOW / 1000;
const WINDOW_MS = 300_000;
const API = "https://api.example.com";
const AUTH = "https://auth.example.com";
const PR_PATH = "/.well-known/oauth-protected-resource";

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const { pem, sign } = await ownSigningKey();
const KEY = await dpopKey();
const CLIENTS = await clientsYaml([APP]);

const ROUTES = `  - path: /v1/items
    methods: [GET]
  - path: /v1/bound
    methods: [GET]
    dpop: required
`;

let now = NOW;
t.beforeEach(() => {
  now = NOW;
});

/**
 * A gatehouse with `tokens` (indented) and `top` (top-level YAML) and the two routes, its YAML
 * changed by `edit`.
 */
async function gatehouse(
  tokens: string,
  top = "",
  edit = (text: string) => text,
): Promise<TestGatehouse> {
  const started = await startTestGatehouse(edit(yaml(tokens, top, ROUTES)), {
    now: () => now,
    files: { "signing.pem": pem },
  });
  t.teardown(() => started.close());
  return started;
}

function yaml(tokens: string, top: string, routes: string): string {
  return configFor(
    upstream.url,
    `${top}tokens:
  signing: { algorithm: EdDSA, key_file: ./signing.pem }
${tokens}${CLIENTS}routes:
${routes}`,
  );
}

/** An own token for APP bound to KEY (or not, when `bound` is false), for `aud` from `iss`. */
const token = (iss = "gatehouse", aud = "upstream", bound = true): Promise<string> =>
  sign({
    iss,
    aud,
    sub: APP.id,
    client_id: APP.id,
    iat: NOW_S,
    exp: NOW_S + 3600,
    jti: randomUUID(),
    ...(bound ? { cnf: { jkt: KEY.jkt } } : {}),
  });

/** KEY's proof of a GET of `htu` with `bound`, at the injected now. */
const proofOf = (bound: string, htu: string, more: Partial<ProofFor> = {}) =>
  proof(KEY, { htm: "GET", htu, iat: Math.floor(now / 1000), token: bound, ...more });

t.test("invalid proofs count against tokens.failure_limit; binding refusals do not", async (t) => {
  const g = await gatehouse(
    "  failure_limit: { limit: 3, window: 1m }\n",
    "trusted_proxies: [127.0.0.1]\n",
  );
  const bound = await token();
  const htu = `${g.url}/v1/items`;
  const from = (ip: string, headers: Record<string, string>) => ({
    ...headers,
    "x-forwarded-for": ip,
  });
  const bad: Array<Partial<ProofFor>> = [{ htm: "POST" }, { token: "another" }, { htu: g.url }];
  for (const more of bad) {
    const headers = from("198.51.100.7", dpopHeaders(bound, await proofOf(bound, htu, more)));
    t.equal((await send(htu, { headers })).status, 401, "a bad proof");
  }
  // The token was verified on the first request: from here on only its proofs are new.
  const before = upstream.received.length;
  const limited = await send(htu, {
    headers: from("198.51.100.7", dpopHeaders(bound, await proofOf(bound, htu))),
  });
  t.equal(limited.status, 429, "then a good proof from that address too");
  t.match(json(limited), { error: "rate_limited", limit: 3, window: "1m" });
  t.match(
    json(limited).message,
    /^too many refused bearer tokens from this address: more than 3 per 1m; retry after \d+ s$/,
  );
  t.notOk("www-authenticate" in limited.headers, "a 429 carries no challenge");
  t.equal((await observed(g, limited)).reason, "bearer_rate_limited");
  t.equal(upstream.received.length, before, "nothing forwarded");
  const elsewhere = from("198.51.100.8", dpopHeaders(bound, await proofOf(bound, htu)));
  t.equal((await send(htu, { headers: elsewhere })).status, 200, "another address is served");

  // A token sent against its binding is no forgery: its client only used the wrong scheme.
  const plain = await token("gatehouse", "upstream", false);
  for (let i = 0; i < 4; i++) {
    const asBearer = from("198.51.100.9", { authorization: `Bearer ${bound}` });
    t.equal((await send(htu, { headers: asBearer })).status, 401, "bound_as_bearer");
    const unbound = from("198.51.100.9", dpopHeaders(plain, await proofOf(plain, htu)));
    t.equal((await send(htu, { headers: unbound })).status, 401, "not_bound");
  }
  const last = from("198.51.100.9", dpopHeaders(bound, await proofOf(bound, htu)));
  t.equal((await send(htu, { headers: last })).status, 200, "eight binding refusals, not limited");
});

t.test("behind a trusted proxy, X-Forwarded-Proto: https makes the htu https", async (t) => {
  // Authorization forwarded: a DPoP-scheme one is dropped all the same.
  const g = await gatehouse("", "trusted_proxies: [127.0.0.1]\n", (text) =>
    text.replace("  timeout: 2s\n", "  timeout: 2s\n  forward_authorization: true\n"),
  );
  const bound = await token();
  const path = "/v1/bound";
  const https = `https://127.0.0.1:${g.port}${path}`;
  const http = `http://127.0.0.1:${g.port}${path}`;
  const status = async (htu: string, proto: string | undefined) => {
    const headers = dpopHeaders(bound, await proofOf(bound, htu));
    if (proto !== undefined) headers["x-forwarded-proto"] = proto;
    return (await send(`${g.url}${path}`, { headers })).status;
  };
  t.equal(await status(https, "https"), 200, "https from the trusted proxy");
  t.equal(await status(https, "HTTPS"), 200, "in any case");
  t.equal(await status(https, "https, http"), 200, "the first value: the client's own hop");
  t.equal(await status(http, "https"), 401, "then an http htu is another URL");
  t.equal(await status(http, "http"), 200, "http when the proxy says so");
  t.equal(await status(http, undefined), 200, "http when it says nothing");
  t.equal(await status(https, undefined), 401, "and then not https");
  const seen = upstream.received.at(-1)?.headers ?? {};
  t.notOk("authorization" in seen, "a DPoP-scheme Authorization is never forwarded");
  t.notOk("dpop" in seen, "nor the proof");
  const plain = await token("gatehouse", "upstream", false);
  const forwarded = await send(`${g.url}/v1/items`, {
    headers: { authorization: `Bearer ${plain}` },
  });
  t.equal(forwarded.status, 200);
  t.equal(upstream.received.at(-1)?.headers.authorization, `Bearer ${plain}`, "Bearer is");
});

t.test("an http(s) tokens.audience is the htu's origin, whatever the Host", async (t) => {
  const g = await gatehouse(`  issuer: ${AUTH}\n  audience: ${API}\n`);
  const bound = await token(AUTH, API);
  for (const host of [`127.0.0.1:${g.port}`, "other.example.org", "api.example.com"]) {
    const headers = { ...dpopHeaders(bound, await proofOf(bound, `${API}/v1/items`)), host };
    t.equal((await send(`${g.url}/v1/items`, { headers })).status, 200, `Host: ${host}`);
  }
  const tail = `, resource_metadata="${API}${PR_PATH}"`;
  for (const [kind, path] of [
    ["optional", "/v1/items"],
    ["required", "/v1/bound"],
  ] as const) {
    const own = dpopHeaders(bound, await proofOf(bound, `${g.url}${path}`));
    t.strictSame(
      await refusal(g, path, own),
      refusedAs(kind, "invalid_dpop_proof", "dpop_htu", PROOF_RULES.htu, true, tail),
      `${kind}: the request's own origin is not the resource's`,
    );
  }
});

t.test(
  "nonces: refused without one, given in DPoP-Nonce, good for this slot and the next",
  async (t) => {
    // Each refusal for the nonce counts against the address: the limit leaves room for them.
    const g = await gatehouse(
      "  failure_limit: { limit: 100, window: 1h }\n  dpop: { nonce: true }\n",
    );
    const bound = await token();
    const url = (kind: "optional" | "required") =>
      `${g.url}${kind === "optional" ? "/v1/items" : "/v1/bound"}`;
    const ask = async (kind: "optional" | "required", nonce?: string) =>
      send(url(kind), { headers: dpopHeaders(bound, await proofOf(bound, url(kind), { nonce })) });
    const expected = (kind: "optional" | "required") =>
      refusedAs(kind, "use_dpop_nonce", "dpop_nonce", PROOF_RULES.nonce);

    const nonces = new Set<string>();
    for (const kind of ["optional", "required", "optional", "required", "optional"] as const) {
      const answer = await ask(kind);
      t.strictSame(await observed(g, answer), expected(kind), `${kind}: no nonce`);
      nonces.add(String(answer.headers["dpop-nonce"]));
    }
    t.equal(nonces.size, 1, "one nonce in a slot");
    const [nonce] = [...nonces] as [string];
    t.match(nonce, /^[A-Za-z0-9_-]{22,}$/, "a nonce of base64url characters");
    // One character of its MAC changed.
    const forged = `${nonce.slice(0, 12)}${nonce[12] === "A" ? "B" : "A"}${nonce.slice(13)}`;
    const wrong = await ask("optional", forged);
    t.equal(wrong.status, 401, "a nonce that is not the one given");
    t.equal(wrong.headers["dpop-nonce"], nonce);
    for (const kind of ["optional", "required"] as const) {
      t.equal((await ask(kind, nonce)).status, 200, `${kind}: with the nonce`);
    }

    now = NOW + WINDOW_MS;
    t.equal((await ask("required", nonce)).status, 200, "the next slot: still good");
    const next = String((await ask("required")).headers["dpop-nonce"]);
    t.not(next, nonce, "the next slot has a nonce of its own");

    now = NOW + 2 * WINDOW_MS;
    const stale = await ask("required", nonce);
    t.strictSame(await observed(g, stale), expected("required"), "two slots on: refused");
    const fresh = String(stale.headers["dpop-nonce"]);
    t.not(fresh, nonce, "with a new nonce");
    t.not(fresh, next);
    t.equal((await ask("required", fresh)).status, 200, "which passes");
    t.equal((await ask("optional", next)).status, 200, "as the one slot before does");
  },
);

t.test("RFC 9728: the DPoP members, and the document in every challenge", async (t) => {
  const tokens = `  issuer: ${AUTH}\n  audience: ${API}\n`;
  const g = await gatehouse(tokens);
  const document = async () => json(await send(`${g.url}${PR_PATH}`));
  t.strictSame(await document(), {
    resource: API,
    authorization_servers: [AUTH],
    bearer_methods_supported: ["header"],
    dpop_signing_alg_values_supported: ["ES256", "EdDSA", "Ed25519", "PS256", "RS256"],
  });
  const tail = `, resource_metadata="${API}${PR_PATH}"`;
  t.equal(
    (await send(`${g.url}/v1/items`)).headers["www-authenticate"],
    `Bearer realm="gatehouse"${tail}, DPoP algs="ES256 EdDSA Ed25519 PS256 RS256"`,
  );
  t.equal(
    (await send(`${g.url}/v1/bound`)).headers["www-authenticate"],
    `DPoP algs="ES256 EdDSA Ed25519 PS256 RS256"${tail}`,
  );

  // Every bearer route requires DPoP (an open one is no bearer route), with one algorithm.
  const only = `  - path: /v1/items
    methods: [GET]
    dpop: required
  - path: /v1/bound
    methods: [GET]
    dpop: required
  - path: /v1/open
    methods: [GET]
    auth: none
`;
  await g.writeConfig(yaml(`${tokens}  dpop: { algorithms: [ES256] }\n`, "", only));
  t.equal(await g.gatehouse.reload(), "success");
  t.match(await document(), {
    dpop_signing_alg_values_supported: ["ES256"],
    dpop_bound_access_tokens_required: true,
  });
  const bound = await token(AUTH, API);
  const asBearer = await refusal(g, "/v1/items", { authorization: `Bearer ${bound}` });
  const words = BEARER_REFUSALS.bound_as_bearer;
  t.equal(
    asBearer.challenge,
    `DPoP error="invalid_token", error_description="${words}", algs="ES256"${tail}`,
  );
  const answer = await send(`${g.url}/v1/items`, {
    headers: dpopHeaders(bound, await proofOf(bound, `${API}/v1/items`)),
  });
  t.equal(answer.status, 200, "a bound token with its proof");
});
