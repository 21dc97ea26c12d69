/**
 * DPoP at the door (RFC 9449 §7), through real sockets to a real upstream: a token bound to a
 * client's key (`cnf.jkt`, signed here with the gatehouse's own key) passes only with a proof of
 * that key made for this request, on a route that requires DPoP and on one that also takes plain
 * tokens. Every way a proof or a scheme can be wrong is refused with its rule: the status, the
 * error code, the exact WWW-Authenticate, the body's words and the access log's reason. The
 * proof and the DPoP-scheme Authorization never reach the upstream.
 */
import { createHmac, randomUUID } from "node:crypto";
import t from "tap";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import { PROOF_RULES, type ProofRule } from "../src/tokens/dpop-proof.js";
import { BEARER_REFUSALS } from "../src/tokens/refusal-reasons.js";
import { json, send } from "./helpers/client.js";
import {
  ALGS,
  dpopHeaders,
  dpopKey,
  ownSigningKey,
  proof,
  refusal,
  refusedAs,
  tokenHash,
  type DpopKey,
  type ProofFor,
  type RouteKind,
} from "./helpers/dpop.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { scrape } from "./helpers/metrics.js";
import { rawRequest } from "./helpers/raw.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = {
  id: "reporting-app",
  secret: "correct-horse-battery-staple-42",
  extra: ["scopes: [items:read, items:write]"],
};
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const NOW_S = NOW / 1000;
// The paths of a route that also takes plain tokens, and of one that requires DPoP.
const PATHS: Record<RouteKind, string> = { optional: "/v1/items", required: "/v1/bound" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const { pem, sign } = await ownSigningKey();

let now = NOW;
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `tokens:
  signing: { algorithm: EdDSA, key_file: ./signing.pem }
  scopes: [items:read, items:write]
  # Every bad proof below comes from 127.0.0.1; the failure limit has its own test.
  failure_limit: { limit: 1000, window: 1m }
${await clientsYaml([APP])}plans:
  default:
    rate_limit: { limit: 1000, window: 1m }
routes:
  - path: /v1/items
    methods: [GET, POST]
  - path: /v1/bound
    methods: [GET]
    dpop: required
  - path: /v1/admin
    methods: [GET]
    scopes: [items:write]
`,
  ),
  { now: () => now, files: { "signing.pem": pem } },
);
t.teardown(() => g.close());

const KEY = await dpopKey();
const OTHER_KEY = await dpopKey();

/** An own token for APP, bound to `key` unless it is null, with `extra` claims. */
function token(key: DpopKey | null = KEY, extra: Record<string, unknown> = {}): Promise<string> {
  return sign({
    iss: "gatehouse",
    aud: "upstream",
    sub: APP.id,
    client_id: APP.id,
    scope: "items:read",
    iat: NOW_S,
    exp: NOW_S + 3600,
    jti: randomUUID(),
    ...(key === null ? {} : { cnf: { jkt: key.jkt } }),
    ...extra,
  });
}

/** A proof by KEY for a GET of `path` with `bound`, at the injected now, changed by `more`. */
function proofFor(bound: string, path: string, more: Partial<ProofFor> = {}): Promise<string> {
  return proof(KEY, {
    htm: "GET",
    htu: `${g.url}${path}`,
    iat: Math.floor(now / 1000),
    token: bound,
    ...more,
  });
}

const get = (path: string, headers: Record<string, string>, method = "GET") =>
  send(`${g.url}${path}`, { method, headers });

/** The 401 invalid_dpop_proof of `rule` on a route of `kind`. */
const proofRefused = (kind: RouteKind, rule: ProofRule) =>
  refusedAs(kind, "invalid_dpop_proof", `dpop_${rule}`, PROOF_RULES[rule]);

/** The 401 invalid_token of a binding rule, to a request that used the DPoP scheme or not. */
const bindingRefused = (
  kind: RouteKind,
  rule: "bound_as_bearer" | "not_bound" | "dpop_required",
  dpop: boolean,
) => refusedAs(kind, "invalid_token", rule, BEARER_REFUSALS[rule], dpop);

t.beforeEach(() => {
  now = NOW;
});

t.test(
  "a bound token with its proof passes on both routes; the upstream sees neither",
  async (t) => {
    const bound = await token();
    for (const kind of ["optional", "required"] as const) {
      const path = PATHS[kind];
      const before = upstream.received.length;
      const answer = await get(path, dpopHeaders(bound, await proofFor(bound, path)));
      t.equal(answer.status, 200, kind);
      const seen = upstream.received[before];
      t.equal(seen?.url, path, `${kind}: forwarded`);
      t.equal(seen?.headers["x-client-id"], APP.id, `${kind}: the token's client`);
      t.notOk(seen && "dpop" in seen.headers, `${kind}: no DPoP header`);
      t.notOk(seen && "authorization" in seen.headers, `${kind}: no Authorization`);
    }
    // A second request with the same (now cached) token and a new proof.
    const again = await get("/v1/items", dpopHeaders(bound, await proofFor(bound, "/v1/items")));
    t.equal(again.status, 200, "a cached token with a fresh proof");
    const posted = await get(
      "/v1/items",
      dpopHeaders(bound, await proofFor(bound, "/v1/items", { htm: "POST" })),
      "POST",
    );
    t.equal(posted.status, 200, "htm is the request's method");
    t.equal(upstream.received.at(-1)?.method, "POST");
    // RFC 9110 §11.1: the scheme is case-insensitive, for DPoP as for Bearer.
    const lower = await get("/v1/bound", {
      authorization: `dpop ${bound}`,
      dpop: await proofFor(bound, "/v1/bound"),
    });
    t.equal(lower.status, 200, "the scheme in lower case");
  },
);

t.test("the htu is the request's Host and path as sent, in http, without the query", async (t) => {
  const bound = await token();
  const path = "/v1/items";
  const passes = async (htu: string, target: string, headers: Record<string, string> = {}) =>
    (
      await get(target, {
        ...dpopHeaders(bound, await proof(KEY, { htm: "GET", htu, iat: NOW_S, token: bound })),
        ...headers,
      })
    ).status;
  t.equal(await passes(`${g.url}${path}`, `${path}?a=1&b=2`), 200, "the query is no part of it");
  t.equal(await passes(`${g.url}${path}?other=1`, path), 200, "nor of the proof's htu");
  // RFC 3986 §6.2.2: scheme and host in any case, the default port, unreserved escapes.
  const named = { host: "API.Example.com:80" };
  t.equal(await passes(`http://api.example.com${path}`, path, named), 200, "the Host, normalised");
  t.equal(await passes(`HTTP://api.example.COM:80/v1/%69tems`, path, named), 200, "the htu, too");
  // 127.0.0.1 is no trusted proxy here: its X-Forwarded-Proto says nothing of the client.
  const claimed = { "x-forwarded-proto": "https" };
  t.equal(await passes(`${g.url}${path}`, path, claimed), 200, "an untrusted peer's https");
  t.strictSame(
    await refusal(g, path, {
      ...dpopHeaders(
        bound,
        await proofFor(bound, path, { htu: `https://127.0.0.1:${g.port}${path}` }),
      ),
      ...claimed,
    }),
    proofRefused("optional", "htu"),
    "an https htu from an untrusted peer",
  );
});

t.test("a refused htu is logged with the URL the proof had to name, never the token", async (t) => {
  const bound = await token();
  const path = "/v1/items";
  const dpop = await proofFor(bound, path, { htu: `http://elsewhere.example${path}` });
  const answer = await get(`${path}?a=1`, dpopHeaders(bound, dpop));
  t.equal(answer.status, 401);
  const id = answer.headers["x-request-id"];
  const line = await g.logged(
    (entry) => entry.requestId === id && entry.msg === "DPoP proof refused",
  );
  t.match(line, { level: "info", clientId: APP.id, reason: "htu" });
  t.equal(line.expectedHtu, `${g.url}${path}`, "the request's URL, as the proof had to name it");
  await g.logged((entry) => entry.requestId === id && entry.msg === "request");
  const written = JSON.stringify(g.logs.filter((entry) => entry.requestId === id));
  t.notOk(written.includes(bound), "the token is in no line");
  t.notOk(written.includes(dpop), "nor the proof");
});

t.test("an absolute-form target names the URL; a request without a host names none", async (t) => {
  const bound = await token();
  const raw = async (htu: string, head: string): Promise<unknown> => {
    const dpop = await proof(KEY, { htm: "GET", htu, iat: NOW_S, token: bound });
    const answer = await rawRequest(
      g.port,
      `${head}\r\nAuthorization: DPoP ${bound}\r\nDPoP: ${dpop}\r\nConnection: close\r\n\r\n`,
    );
    if (answer.status !== 401) return answer.status;
    const id = answer.headers["x-request-id"];
    const line = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
    return line.reason;
  };
  // RFC 9112 §3.2.2: the target's authority, not Host, is the one the client used.
  const absolute = "GET http://api.example.com/v1/items HTTP/1.1\r\nHost: 127.0.0.1";
  t.equal(await raw("http://api.example.com/v1/items", absolute), 200, "the target's URL");
  t.equal(await raw("http://127.0.0.1/v1/items", absolute), "bearer_dpop_htu", "not Host's");
  // "http://" and the path would make the path's first segment a host: http://v1/items.
  for (const [label, head] of [
    ["HTTP/1.0 without Host", "GET /v1/items HTTP/1.0"],
    ["an empty Host", "GET /v1/items HTTP/1.1\r\nHost:"],
  ]) {
    for (const htu of ["http://v1/items", `${g.url}/v1/items`, "http:///v1/items"]) {
      t.equal(await raw(htu, head as string), "bearer_dpop_htu", `${label}: ${htu}`);
    }
  }
});

t.test("a proof for another URL or method, or with a wrong ath, is refused", async (t) => {
  const bound = await token();
  const cases: Array<[string, Partial<ProofFor>, ProofRule]> = [
    ["another path", { htu: `${g.url}/v1/other` }, "htu"],
    ["another host", { htu: `http://127.0.0.2:${g.port}/v1/items` }, "htu"],
    ["https", { htu: `https://127.0.0.1:${g.port}/v1/items` }, "htu"],
    ["a path prefix", { htu: `${g.url}/v1` }, "htu"],
    ["not a URL", { htu: "/v1/items" }, "htu"],
    // ws is a WebSocket handshake's scheme only.
    ["a ws URL", { htu: `ws://127.0.0.1:${g.port}/v1/items` }, "htu"],
    ["another method", { htm: "POST" }, "htm"],
    ["a method in lower case", { htm: "get" }, "htm"],
    ["the ath of another token", { token: await token() }, "ath"],
    ["no ath", { token: undefined }, "ath"],
    ["no jti", { claims: { jti: undefined } }, "claims"],
    ["an iat that is a string", { claims: { iat: String(NOW_S) } }, "claims"],
    ["typ JWT", { header: { typ: "JWT" } }, "typ"],
    ["no jwk", { header: { jwk: undefined } }, "jwk"],
    ["the jwk of another key", { header: { jwk: OTHER_KEY.jwk } }, "signature"],
  ];
  for (const kind of ["optional", "required"] as const) {
    const path = PATHS[kind];
    for (const [label, more, rule] of cases) {
      const headers = dpopHeaders(bound, await proofFor(bound, path, more));
      t.strictSame(await refusal(g, path, headers), proofRefused(kind, rule), `${kind}: ${label}`);
    }
  }
});

t.test("a proof signed by a key other than the token's is refused as dpop_key", async (t) => {
  const bound = await token();
  for (const kind of ["optional", "required"] as const) {
    const path = PATHS[kind];
    const other = await proof(OTHER_KEY, {
      htm: "GET",
      htu: `${g.url}${path}`,
      iat: NOW_S,
      token: bound,
    });
    t.strictSame(
      await refusal(g, path, dpopHeaders(bound, other)),
      proofRefused(kind, "key"),
      kind,
    );
  }
  const theirs = await token(OTHER_KEY);
  const own = await proofFor(theirs, "/v1/items");
  t.strictSame(
    await refusal(g, "/v1/items", dpopHeaders(theirs, own)),
    proofRefused("optional", "key"),
    "a token bound to another key, with this key's proof",
  );
});

t.test("alg none, HS256 and a jwk with private members are refused", async (t) => {
  const bound = await token();
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const claims = b64({
    jti: randomUUID(),
    htm: "GET",
    htu: `${g.url}/v1/items`,
    iat: NOW_S,
    ath: tokenHash(bound),
  });
  const unsigned = `${b64({ typ: "dpop+jwt", alg: "none", jwk: KEY.jwk })}.${claims}`;
  // HS256 under a secret the proof names itself, or under the client's public key's bytes.
  const secret = Buffer.from("a-secret-of-at-least-thirty-two-bytes!!");
  const hmac = (jwk: JWK, key: Buffer): string => {
    const input = `${b64({ typ: "dpop+jwt", alg: "HS256", jwk })}.${claims}`;
    return `${input}.${createHmac("sha256", key).update(input).digest("base64url")}`;
  };
  const oct = { kty: "oct", k: secret.toString("base64url") };
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const withD = await proof(
    { ...KEY, jwk: await exportJWK(privateKey), privateKey },
    { htm: "GET", htu: `${g.url}/v1/items`, iat: NOW_S, token: bound },
  );
  const cases: Array<[string, string, ProofRule]> = [
    ["alg none, no signature", `${unsigned}.`, "malformed"],
    ["alg none with a signature", `${unsigned}.AAAA`, "algorithm"],
    ["HS256 with an oct jwk", hmac(oct, secret), "algorithm"],
    [
      "HS256 under the public key",
      hmac(KEY.jwk, Buffer.from(JSON.stringify(KEY.jwk))),
      "algorithm",
    ],
    ["a jwk with d", withD, "jwk"],
    ["not a JWT", "not-a-jwt", "malformed"],
    ["an empty proof", "", "malformed"],
  ];
  for (const [label, value, rule] of cases) {
    t.strictSame(
      await refusal(g, "/v1/items", { authorization: `DPoP ${bound}`, dpop: value }),
      proofRefused("optional", rule),
      label,
    );
  }
});

t.test("a proof used once is refused the second time as dpop_replay", async (t) => {
  const bound = await token();
  for (const kind of ["optional", "required"] as const) {
    const path = PATHS[kind];
    const once = await proofFor(bound, path);
    t.equal((await get(path, dpopHeaders(bound, once))).status, 200, `${kind}: first use`);
    const before = upstream.received.length;
    t.strictSame(
      await refusal(g, path, dpopHeaders(bound, once)),
      proofRefused(kind, "replay"),
      `${kind}: second use`,
    );
    t.equal(upstream.received.length, before, `${kind}: the replay is not forwarded`);
  }
  // A refused proof is not held: the same jti, in a proof that passes, is its first use.
  const jti = randomUUID();
  const wrong = await proofFor(bound, "/v1/items", { htm: "POST", claims: { jti } });
  t.equal((await get("/v1/items", dpopHeaders(bound, wrong))).status, 401);
  const right = await proofFor(bound, "/v1/items", { claims: { jti } });
  t.equal((await get("/v1/items", dpopHeaders(bound, right))).status, 200, "not held when refused");
});

t.test("an iat more than iat_window from now, behind or ahead, is refused", async (t) => {
  const bound = await token();
  const path = "/v1/items";
  // iat_window 300 s is all the leeway, either way: clock_tolerance (30 s) does not add to it.
  const made = [await proofFor(bound, path), await proofFor(bound, path)];
  now = NOW + 299_000;
  t.equal((await get(path, dpopHeaders(bound, made[0] as string))).status, 200, "299 s old");
  now = NOW + 301_000;
  t.strictSame(
    await refusal(g, path, dpopHeaders(bound, made[1] as string)),
    proofRefused("optional", "iat"),
    "301 s old",
  );
  now = NOW;
  const soon = await proofFor(bound, path, { iat: NOW_S + 299 });
  t.equal((await get(path, dpopHeaders(bound, soon))).status, 200, "299 s ahead");
  for (const kind of ["optional", "required"] as const) {
    const ahead = await proofFor(bound, PATHS[kind], { iat: NOW_S + 301 });
    t.strictSame(
      await refusal(g, PATHS[kind], dpopHeaders(bound, ahead)),
      proofRefused(kind, "iat"),
      `${kind}: 301 s ahead`,
    );
  }
});

t.test("no DPoP header, or two DPoP lines, is refused as dpop_header", async (t) => {
  const bound = await token();
  for (const kind of ["optional", "required"] as const) {
    t.strictSame(
      await refusal(g, PATHS[kind], dpopHeaders(bound, undefined)),
      proofRefused(kind, "header"),
      `${kind}: the DPoP scheme without a proof`,
    );
  }
  const one = await proofFor(bound, "/v1/items");
  const answer = await rawRequest(
    g.port,
    `GET /v1/items HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: DPoP ${bound}\r\n` +
      `DPoP: ${one}\r\nDPoP: ${one}\r\nConnection: close\r\n\r\n`,
  );
  const expected = proofRefused("optional", "header");
  t.equal(answer.status, 401);
  t.equal(answer.headers["www-authenticate"], expected.challenge);
  t.match(JSON.parse(answer.body), { error: expected.error, message: expected.message });
  const id = answer.headers["x-request-id"];
  const line = await g.logged((entry) => entry.requestId === id && entry.msg === "request");
  t.equal(line.reason, "bearer_dpop_header");
  // The same proof, alone, was never spent by the refused request.
  t.equal((await get("/v1/items", dpopHeaders(bound, one))).status, 200, "one line passes");
});

t.test("a token against its binding, or a plain one where DPoP is required", async (t) => {
  const bound = await token();
  const plain = await token(null);
  const before = upstream.received.length;
  for (const kind of ["optional", "required"] as const) {
    t.strictSame(
      await refusal(g, PATHS[kind], { authorization: `Bearer ${bound}` }),
      bindingRefused(kind, "bound_as_bearer", false),
      `${kind}: a bound token as Bearer (RFC 9449 §7.2)`,
    );
    const withProof = {
      authorization: `Bearer ${bound}`,
      dpop: await proofFor(bound, PATHS[kind]),
    };
    t.strictSame(
      await refusal(g, PATHS[kind], withProof),
      bindingRefused(kind, "bound_as_bearer", false),
      `${kind}: as Bearer, even with its proof`,
    );
    const plainProof = await proofFor(plain, PATHS[kind]);
    t.strictSame(
      await refusal(g, PATHS[kind], dpopHeaders(plain, plainProof)),
      bindingRefused(kind, "not_bound", true),
      `${kind}: a plain token with the DPoP scheme`,
    );
  }
  t.strictSame(
    await refusal(g, "/v1/bound", { authorization: `Bearer ${plain}` }),
    bindingRefused("required", "dpop_required", false),
    "a plain token where DPoP is required",
  );
  t.strictSame(
    await refusal(g, "/v1/bound", {}),
    {
      status: 401,
      challenge: `DPoP ${ALGS}`,
      error: "unauthorized",
      message: BEARER_REFUSALS.missing,
      reason: "bearer_missing",
    },
    "no credentials where DPoP is required: the DPoP challenge alone",
  );
  t.equal(upstream.received.length, before, "nothing forwarded");
  const stray = await get("/v1/items", {
    authorization: `Bearer ${plain}`,
    dpop: await proofFor(plain, "/v1/items"),
  });
  t.equal(stray.status, 200, "a plain token as Bearer passes where DPoP is optional");
  t.notOk("dpop" in (upstream.received.at(-1)?.headers ?? {}), "its stray DPoP header dropped");
});

t.test(
  "a bound token without the route's scope: 403, the error in the DPoP challenge",
  async (t) => {
    const bound = await token();
    const answer = await get("/v1/admin", dpopHeaders(bound, await proofFor(bound, "/v1/admin")));
    t.equal(answer.status, 403);
    const words = BEARER_REFUSALS.insufficient_scope;
    t.equal(
      answer.headers["www-authenticate"],
      `Bearer realm="gatehouse", DPoP error="insufficient_scope", error_description="${words}", ` +
        `scope="items:write", ${ALGS}`,
    );
    t.equal(json(answer).error, "insufficient_scope");
    const writer = await token(KEY, { scope: "items:write" });
    const allowed = await get(
      "/v1/admin",
      dpopHeaders(writer, await proofFor(writer, "/v1/admin")),
    );
    t.equal(allowed.status, 200, "with the scope");
  },
);

t.test("the refusals are counted by their reason", async (t) => {
  const text = await scrape(g);
  const reasons = ["dpop_header", "dpop_htu", "dpop_htm", "dpop_ath", "dpop_key", "dpop_replay"];
  reasons.push("dpop_iat", "dpop_jwk", "dpop_algorithm", "dpop_malformed", "dpop_typ");
  reasons.push("dpop_signature", "dpop_claims", "bound_as_bearer", "not_bound", "dpop_required");
  for (const reason of reasons) {
    t.match(
      text,
      new RegExp(`^gatehouse_auth_failures_total\\{reason="bearer_${reason}"\\} [1-9]\\d*$`, "m"),
      reason,
    );
  }
});
