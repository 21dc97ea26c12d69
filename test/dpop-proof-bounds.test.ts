/**
 * What a DPoP proof may cost gatehouse, whatever a peer sends (RFC 9449 §11.1 leaves the bounds to
 * the server; docs/dpop.md): a `DPoP` header over 8 KiB is refused before any signature check, at
 * the token endpoint and at the door; an RSA key outside 2048-4096 bits or with an exponent other
 * than 65537 is refused before it is used; and the cache of proof keys keeps nothing of a header
 * but its key, within bounds in entries and in bytes. Through real sockets, but for the cache's
 * own bounds, which no answer shows.
 */
import { randomBytes } from "node:crypto";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import t from "tap";
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type JWK } from "jose";
import {
  createProofVerifier,
  MAX_PROOF_BYTES,
  PROOF_RULES,
  type ProofSettings,
} from "../src/tokens/dpop-proof.js";
import { generateKeyPem } from "../src/tokens/keys.js";
import { json, send } from "./helpers/client.js";
import {
  dpopHeaders,
  dpopTokenRequest,
  dpopKey,
  observed,
  ownSigner,
  proof,
  refusedAs,
  type DpopKey,
} from "./helpers/dpop.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "reporting-secret-0123456789abcdef" };
const NOW = Date.UTC(2026, 5, 1, 12);
const NOW_S = NOW / 1000;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `tokens:
  # Every refused proof below comes from 127.0.0.1; counting them has its own test.
  failure_limit: { limit: 10000, window: 1m }
${await clientsYaml([APP])}routes:
  - path: /v1/items
    methods: [GET]
`,
  ),
  { now: () => NOW },
);
t.teardown(() => g.close());
const TOKEN_URL = `${g.url}/oauth/token`;
const ITEMS_URL = `${g.url}/v1/items`;
const KEY = await dpopKey();

/** A token request of APP with the DPoP header `dpop`, and the secret `secret`. */
const tokenRequest = (dpop: string, secret = APP.secret) =>
  dpopTokenRequest(g.url, { ...APP, secret }, dpop);

/** A proof by `key` for the token endpoint, its header changed by `header`. */
const tokenProof = (key: DpopKey, header: Record<string, unknown> = {}) =>
  proof(key, { htm: "POST", htu: TOKEN_URL, iat: NOW_S, header });

/** The 400 of `rule` at the token endpoint. */
const refusedAtToken = (rule: keyof typeof PROOF_RULES) => ({
  status: 400,
  body: { error: "invalid_dpop_proof", error_description: PROOF_RULES[rule] },
});

const answerOf = (response: Awaited<ReturnType<typeof send>>) => ({
  status: response.status,
  body: json(response),
});

// The base64url length of `bytes` bytes, without padding.
const encoded = (bytes: number) => Math.ceil((bytes * 4) / 3);

/**
 * A proof of KEY for the token endpoint exactly `length` characters long, padded by a header
 * member and its jti (an ES256 signature is always 86 characters).
 */
async function proofOfLength(length: number): Promise<string> {
  const header = { typ: "dpop+jwt", alg: "ES256", jwk: KEY.jwk, pad: "" };
  const claims = { jti: "", htm: "POST", htu: TOKEN_URL, iat: NOW_S };
  const size = (value: object) => Buffer.byteLength(JSON.stringify(value));
  for (let pad = 0; pad < length; pad++) {
    for (let jti = 8; jti < 12; jti++) {
      const padded = { ...header, pad: "p".repeat(pad) };
      const named = { ...claims, jti: randomBytes(jti).toString("hex").slice(0, jti) };
      if (encoded(size(padded)) + 1 + encoded(size(named)) + 1 + 86 !== length) continue;
      return new SignJWT(named).setProtectedHeader(padded).sign(KEY.privateKey);
    }
  }
  throw new Error(`no proof of ${length} characters`);
}

t.test(
  "a DPoP header over 8 KiB is refused at the token endpoint before anything else",
  async (t) => {
    const largest = await proofOfLength(MAX_PROOF_BYTES);
    t.equal(largest.length, MAX_PROOF_BYTES);
    const accepted = await tokenRequest(largest);
    t.equal(accepted.status, 200, "8192 bytes: checked, and bound");
    t.equal(json(accepted).token_type, "DPoP");

    const over = await proofOfLength(MAX_PROOF_BYTES + 1);
    t.strictSame(answerOf(await tokenRequest(over)), refusedAtToken("too_large"), "8193 bytes");
    // Refused before the client is authenticated: a wrong secret is never checked either.
    t.strictSame(
      answerOf(await tokenRequest(over, "a-wrong-secret-of-the-right-length")),
      refusedAtToken("too_large"),
      "before the client's secret",
    );
    const logged = await g.logged((line) => line.msg === "DPoP proof refused");
    t.equal(logged.reason, "too_large");
  },
);

t.test(
  "a DPoP header over 8 KiB is refused at the door before the token is verified",
  async (t) => {
    // A token no key of gatehouse's signed: verifying it would refuse it as unknown_kid.
    const sign = await ownSigner(await generateKeyPem("EdDSA"), "not-a-gatehouse-key");
    const token = await sign({ iss: "gatehouse", aud: "upstream", sub: APP.id, exp: NOW_S + 60 });
    const header = { pad: "p".repeat(6200) };
    const dpop = await proof(KEY, { htm: "GET", htu: ITEMS_URL, iat: NOW_S, token, header });
    t.ok(dpop.length > MAX_PROOF_BYTES, `${dpop.length} bytes`);
    const before = upstream.received.length;
    const answer = await send(ITEMS_URL, { headers: dpopHeaders(token, dpop) });
    t.strictSame(
      await observed(g, answer),
      refusedAs("optional", "invalid_dpop_proof", "dpop_too_large", PROOF_RULES.too_large),
    );
    t.equal(upstream.received.length, before, "nothing forwarded");
  },
);

/** An RSA public JWK with the modulus `n` and exponent `e` given as bytes. */
function rsaJwk(n: Buffer, e: Buffer): JWK {
  return { kty: "RSA", n: n.toString("base64url"), e: e.toString("base64url") };
}

/** `bytes` random bytes whose first one is `first`. */
function startingWith(first: number, bytes: number): Buffer {
  const value = randomBytes(bytes);
  value[0] = first;
  return value;
}

t.test("an RSA key outside 2048-4096 bits or exponent 65537 is refused before use", async (t) => {
  const signer = await generateKeyPair("RS256", { modulusLength: 2048 });
  const e65537 = Buffer.from([1, 0, 1]);
  const cases: Array<[string, JWK]> = [
    ["a 3064-bit exponent", rsaJwk(startingWith(0xc1, 256), startingWith(0x80, 383))],
    ["the exponent 3", rsaJwk(startingWith(0xc1, 256), Buffer.from([3]))],
    ["a 2047-bit modulus", rsaJwk(startingWith(0x7f, 256), e65537)],
    ["a 4097-bit modulus", rsaJwk(startingWith(0x01, 513), e65537)],
    ["a 16384-bit modulus", rsaJwk(startingWith(0xc1, 2048), e65537)],
    [
      "a modulus with leading zeros",
      rsaJwk(Buffer.concat([Buffer.alloc(4), startingWith(0x7f, 256)]), e65537),
    ],
  ];
  // Signed by a key of its own: the jwk each proof names is never the signer's.
  const rsa: DpopKey = { ...signer, jwk: {}, jkt: "" };
  for (const [name, jwk] of cases) {
    const dpop = await tokenProof(rsa, { alg: "RS256", jwk });
    t.strictSame(answerOf(await tokenRequest(dpop)), refusedAtToken("rsa_key"), name);
  }

  // At the door, with a bound token: refused as its own rule, before the signature or the key.
  const bound = json(await tokenRequest(await tokenProof(KEY))).access_token as string;
  const [, jwk] = cases[0] as [string, JWK];
  const dpop = await proof(rsa, {
    htm: "GET",
    htu: ITEMS_URL,
    iat: NOW_S,
    token: bound,
    header: { alg: "RS256", jwk },
  });
  t.strictSame(
    await observed(g, await send(ITEMS_URL, { headers: dpopHeaders(bound, dpop) })),
    refusedAs("optional", "invalid_dpop_proof", "dpop_rsa_key", PROOF_RULES.rsa_key),
  );
});

t.test("RSA keys of 2048 and 4096 bits with exponent 65537 are accepted", async (t) => {
  for (const [alg, modulusLength] of [
    ["RS256", 2048],
    ["PS256", 4096],
  ] as const) {
    const pair = await generateKeyPair(alg, { modulusLength, extractable: true });
    const jwk = await exportJWK(pair.publicKey);
    const key: DpopKey = { ...pair, jwk, jkt: await calculateJwkThumbprint(jwk) };
    const answer = await tokenRequest(await tokenProof(key, { alg }));
    t.equal(answer.status, 200, `${alg}, ${modulusLength} bits`);
  }
});

/** The heap in use once garbage is collected. */
function heapAfterGc(): number {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

t.test("the cache of proof keys keeps nothing of a header but its key", async (t) => {
  const requests = 2000;
  g.logs.length = 0;
  const before = heapAfterGc();
  // Headers of 7.5 KB, each with a member of its own beside the one key: the cache once kept
  // every header as sent.
  for (let i = 0; i < requests; i++) {
    const answer = await tokenRequest(await tokenProof(KEY, { note: `${i}:${"n".repeat(5600)}` }));
    if (answer.status !== 200) t.fail(`answered ${answer.status}`);
  }
  g.logs.length = 0;
  const grown = heapAfterGc() - before;
  // 2000 headers of 7.5 KB are 15 MB; one key is a few hundred bytes.
  t.ok(grown < 6 * 1024 * 1024, `the heap grew by ${Math.round(grown / 1024)} KiB`);
});

const settings: ProofSettings = {
  algorithms: ["ES256", "RS256"],
  iatWindowSeconds: 300,
  clockToleranceSeconds: 30,
  nonces: undefined,
};
const check = { method: "POST", url: "https://auth.example.com/oauth/token" };

/** A proof for `check` by a new key of `alg`. */
async function newKeyProof(alg: "ES256" | "RS256"): Promise<string> {
  const key = await dpopKey();
  if (alg === "ES256") return proof(key, { htm: "POST", htu: check.url, iat: NOW_S });
  const pair = await generateKeyPair("RS256", { modulusLength: 2048, extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  return proof(
    { ...pair, jwk, jkt: "" },
    { htm: "POST", htu: check.url, iat: NOW_S, header: { alg } },
  );
}

t.test("the cache of proof keys is bounded in entries and in bytes", async (t) => {
  const byEntries = createProofVerifier(settings, 3, 1024 * 1024);
  for (let i = 0; i < 5; i++) await byEntries.verify(await newKeyProof("ES256"), check, NOW);
  t.equal(byEntries.footprint().entries, 3, "three entries, the last three keys");

  // An RSA key of 2048 bits counts 342 characters of modulus beyond an entry's 512 bytes.
  const byBytes = createProofVerifier(settings, 100, 2000);
  for (let i = 0; i < 4; i++) await byBytes.verify(await newKeyProof("RS256"), check, NOW);
  const { entries, bytes } = byBytes.footprint();
  t.equal(entries, 2, "as many as fit in 2000 bytes");
  t.ok(bytes <= 2000, `${bytes} bytes`);
});
