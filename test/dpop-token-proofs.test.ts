/**
 * DPoP at the token endpoint (RFC 9449 §4.3, §5; docs/dpop.md) with hand-made proofs, through
 * real sockets on a clock the test holds: a proof that passes binds the token, each rule a proof
 * can break is refused with its words, a proof is accepted once, a `dpop: required` client needs
 * one, nonces (§8) are required when on, the URL a proof names is the one the metadata publishes,
 * and with Redis a proof used at one replica is refused at another.
 */
import { randomBytes, randomUUID } from "node:crypto";
import t, { type Test } from "tap";
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from "jose";
import { json, send, type ClientResponse } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import { claimsOf, clientsYaml, form, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";

const APP: TestClient = { id: "reporting-app", secret: "reporting-secret-0123456789abcdef" };
const STRICT: TestClient = {
  id: "strict-app",
  secret: "strict-secret-0123456789abcdef01",
  extra: ["dpop: required"],
};

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/**
 * A config for APP and STRICT with `tokens` lines (indented two spaces) and `more` YAML. Every
 * refused proof below comes from 127.0.0.1 and counts against it: the failure limit has its own
 * test.
 */
async function yaml(tokens: string, more = ""): Promise<string> {
  const limit = "  failure_limit: { limit: 1000, window: 1m }\n";
  return configFor(
    upstream.url,
    `tokens:\n${limit}${tokens}${await clientsYaml([APP, STRICT])}${more}`,
  );
}

// Gatehouses whose clock the test holds, without nonces and with.
let clock = Date.UTC(2026, 5, 1, 12);
const manual = await startTestGatehouse(await yaml("  dpop: {}\n"), { now: () => clock });
t.teardown(() => manual.close());
const nonced = await startTestGatehouse(await yaml("  dpop: { nonce: true }\n"), {
  now: () => clock,
});
t.teardown(() => nonced.close());

const proofKey = await generateKeyPair("ES256", { extractable: true });
const proofJwk = await exportJWK(proofKey.publicKey);
const proofJkt = await calculateJwkThumbprint(proofJwk);

/** An answer and its JSON body. */
type Answer = ClientResponse & { readonly json: Record<string, unknown> };

/** What a proof carries, each part replaceable or removable (undefined). */
type Parts = Record<string, unknown>;

const defined = (parts: Parts): Parts =>
  Object.fromEntries(Object.entries(parts).filter(([, value]) => value !== undefined));

/** A proof for a token request to `g` at the test's clock, with `claims` and `header` replaced. */
async function proof(g: TestGatehouse, claims: Parts = {}, header: Parts = {}): Promise<string> {
  const payload = defined({
    jti: randomUUID(),
    htm: "POST",
    htu: `${g.url}/oauth/token`,
    iat: Math.floor(clock / 1000),
    ...claims,
  });
  const protectedHeader = defined({ alg: "ES256", typ: "dpop+jwt", jwk: proofJwk, ...header });
  return new SignJWT(payload)
    .setProtectedHeader(protectedHeader as { alg: string })
    .sign(proofKey.privateKey);
}

/** A compact JWS of `header` and `claims` with `signature` as its third part, unsigned. */
function unsigned(header: Parts, claims: Parts, signature = ""): string {
  const part = (value: Parts) => Buffer.from(JSON.stringify(value)).toString("base64url");
  return `${part(header)}.${part(claims)}.${signature}`;
}

/** A token request of `client` to `g` with the DPoP header lines `dpop` (none: no header). */
async function tokenRequest(
  g: TestGatehouse,
  dpop: string | string[] | undefined,
  client: TestClient = APP,
): Promise<Answer> {
  const answer = await send(`${g.url}/oauth/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(dpop === undefined ? {} : { dpop }),
    },
    body: form([
      ["grant_type", "client_credentials"],
      ["client_id", client.id],
      ["client_secret", client.secret],
    ]),
  });
  return { ...answer, json: json(answer) };
}

/** Checks a 400 refusal: its code, its words, never cached. */
function refused(t: Test, answer: Answer, error: string, description: string): void {
  t.equal(answer.status, 400, `${description}: 400`);
  t.strictSame(answer.json, { error, error_description: description });
  t.equal(answer.headers["cache-control"], "no-store");
}

t.test("a proof that passes binds the token; a query in its htu is ignored", async (t) => {
  const answer = await tokenRequest(
    manual,
    await proof(manual, { htu: `${manual.url}/oauth/token?x=1#f` }),
  );
  t.equal(answer.status, 200);
  t.equal(answer.json.token_type, "DPoP");
  t.equal(answer.json.token, answer.json.access_token, "the legacy field stays");
  t.strictSame(claimsOf(answer.json.access_token as string).cnf, { jkt: proofJkt });
  t.equal(answer.headers["dpop-nonce"], undefined, "no nonce without tokens.dpop.nonce");
  const bearer = await tokenRequest(manual, undefined);
  t.equal(bearer.json.token_type, "Bearer", "no proof: a Bearer token, as before");
  t.equal(claimsOf(bearer.json.access_token as string).cnf, undefined);
});

t.test("each rule a proof can break is named in the refusal", async (t) => {
  const now = Math.floor(clock / 1000);
  const claims = { jti: randomUUID(), htm: "POST", htu: `${manual.url}/oauth/token`, iat: now };
  // The private key's JWK: the public members and `d`.
  const privateJwk = await exportJWK(proofKey.privateKey);
  const hs256 = await new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256", typ: "dpop+jwt", jwk: proofJwk })
    .sign(randomBytes(32));
  // Signed with another key than the one its jwk names.
  const otherKey = await generateKeyPair("ES256");
  const forged = await new SignJWT(claims)
    .setProtectedHeader({ alg: "ES256", typ: "dpop+jwt", jwk: proofJwk })
    .sign(otherKey.privateKey);
  const cases: Array<[string, string]> = [
    // RFC 7519 §6.1: an unsecured JWT has an empty signature: no signed JWT at all.
    [unsigned({ alg: "none", typ: "dpop+jwt", jwk: proofJwk }, claims), PROOF_RULES.malformed],
    [
      unsigned({ alg: "none", typ: "dpop+jwt", jwk: proofJwk }, claims, "c2ln"),
      PROOF_RULES.algorithm,
    ],
    [hs256, PROOF_RULES.algorithm],
    [await proof(manual, {}, { jwk: privateJwk }), PROOF_RULES.jwk],
    [await proof(manual, {}, { typ: undefined }), PROOF_RULES.typ],
    [await proof(manual, {}, { typ: "jwt" }), PROOF_RULES.typ],
    [forged, PROOF_RULES.signature],
    [await proof(manual, { jti: undefined }), PROOF_RULES.claims],
    [await proof(manual, { htm: "GET" }), PROOF_RULES.htm],
    [await proof(manual, { htu: "http://elsewhere.example/oauth/token" }), PROOF_RULES.htu],
    [await proof(manual, { htu: `${manual.url}/oauth/revoke` }), PROOF_RULES.htu],
    // The window (300 s) behind now and ahead of it; clock_tolerance (30 s) adds nothing.
    [await proof(manual, { iat: now - 301 }), PROOF_RULES.iat],
    [await proof(manual, { iat: now + 301 }), PROOF_RULES.iat],
  ];
  for (const [dpop, words] of cases) {
    refused(t, await tokenRequest(manual, dpop), "invalid_dpop_proof", words);
  }
  for (const iat of [now - 299, now + 299]) {
    t.equal((await tokenRequest(manual, await proof(manual, { iat }))).status, 200, "within");
  }
});

t.test("a refused htu is logged with the URL the proof had to name", async (t) => {
  const answer = await tokenRequest(
    manual,
    await proof(manual, { htu: "http://elsewhere.example/oauth/token" }),
  );
  t.equal(answer.status, 400);
  const id = answer.headers["x-request-id"];
  const line = await manual.logged(
    (entry) => entry.requestId === id && entry.msg === "DPoP proof refused",
  );
  t.match(line, { level: "info", clientId: APP.id, reason: "htu" });
  t.equal(line.expectedHtu, `${manual.url}/oauth/token`);
});

t.test("a proof is accepted once", async (t) => {
  const dpop = await proof(manual);
  t.equal((await tokenRequest(manual, dpop)).status, 200);
  refused(t, await tokenRequest(manual, dpop), "invalid_dpop_proof", PROOF_RULES.replay);
});

t.test("two DPoP header lines are refused", async (t) => {
  const lines = [await proof(manual), await proof(manual)];
  refused(t, await tokenRequest(manual, lines), "invalid_dpop_proof", PROOF_RULES.header);
  t.equal((await tokenRequest(manual, lines[0])).status, 200, "neither was held");
});

t.test("a client with dpop: required needs a proof", async (t) => {
  const words = "this client must send a DPoP proof";
  refused(t, await tokenRequest(manual, undefined, STRICT), "invalid_dpop_proof", words);
  const answer = await tokenRequest(manual, await proof(manual), STRICT);
  t.equal(answer.status, 200);
  t.equal(answer.json.token_type, "DPoP");
});

t.test("with nonces on, a proof needs a nonce of the current or the last window", async (t) => {
  const missing = await tokenRequest(nonced, await proof(nonced));
  refused(t, missing, "use_dpop_nonce", PROOF_RULES.nonce);
  const nonce = missing.headers["dpop-nonce"] as string;
  t.match(nonce, /^[A-Za-z0-9_-]{30}$/, "the nonce to use");
  // One character of its MAC changed: a nonce gatehouse did not make.
  const forged = `${nonce.slice(0, 12)}${nonce[12] === "A" ? "B" : "A"}${nonce.slice(13)}`;
  refused(
    t,
    await tokenRequest(nonced, await proof(nonced, { nonce: forged })),
    "use_dpop_nonce",
    PROOF_RULES.nonce,
  );
  const good = await tokenRequest(nonced, await proof(nonced, { nonce }));
  t.equal(good.status, 200);
  t.equal(good.json.token_type, "DPoP");
  t.equal(good.headers["dpop-nonce"], nonce, "the nonce of this window, again");
  clock += 300_000;
  t.equal((await tokenRequest(nonced, await proof(nonced, { nonce }))).status, 200, "next window");
  clock += 300_000;
  const stale = await tokenRequest(nonced, await proof(nonced, { nonce }));
  refused(t, stale, "use_dpop_nonce", PROOF_RULES.nonce);
  t.not(stale.headers["dpop-nonce"], nonce, "a fresh nonce");
  const bearer = await tokenRequest(nonced, undefined);
  t.equal(bearer.json.token_type, "Bearer", "no proof, no nonce needed");
});

t.test("with an https issuer, a proof names the URL the metadata publishes", async (t) => {
  await manual.writeConfig(await yaml("  issuer: https://auth.example.com\n"));
  t.equal(await manual.gatehouse.reload(), "success");
  const own = await tokenRequest(manual, await proof(manual));
  refused(t, own, "invalid_dpop_proof", PROOF_RULES.htu);
  const published = await proof(manual, { htu: "https://auth.example.com/oauth/token" });
  t.equal((await tokenRequest(manual, published)).status, 200);
});

t.test("with Redis, a proof used at one replica is refused at another", async (t) => {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const prefix = `gatehouse-dpop-${randomBytes(6).toString("hex")}:`;
  const replica = async () => {
    const g = await startTestGatehouse(
      await yaml(
        "  issuer: https://auth.example.com\n",
        `limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "${prefix}"
    timeout: 10s
    on_outage: closed
`,
      ),
      { now: () => clock },
    );
    t.teardown(() => g.close());
    t.ok(await connected(g), "Redis answers");
    return g;
  };
  const [a, b] = [await replica(), await replica()];
  const dpop = await proof(a, { htu: "https://auth.example.com/oauth/token" });
  t.equal((await tokenRequest(a, dpop)).status, 200);
  refused(t, await tokenRequest(b, dpop), "invalid_dpop_proof", PROOF_RULES.replay);
  const other = await proof(b, { htu: "https://auth.example.com/oauth/token" });
  t.equal((await tokenRequest(b, other)).status, 200, "a new proof of the same key passes");
});
