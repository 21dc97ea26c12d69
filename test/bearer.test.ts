/**
 * Bearer enforcement through real sockets (RFC 6750, RFC 8725; docs/tokens.md): each way a
 * bearer token can be missing or wrong, asserting status, the challenge and the body's error
 * code. Tokens are crafted byte by byte with the configured key, so every claim and header can be
 * wrong on purpose.
 */
import { createPrivateKey, createPublicKey, randomUUID, sign, type KeyObject } from "node:crypto";
import t from "tap";
import { withDpop } from "./helpers/challenges.js";
import { calculateJwkThumbprint, exportJWK, importPKCS8, SignJWT, type JWK } from "jose";
import { generateKeyPem } from "../src/tokens/keys.js";
import { send, type ClientResponse } from "./helpers/client.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { rawRequest } from "./helpers/raw.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { scrape } from "./helpers/metrics.js";
import { readManual, section } from "./helpers/docs.js";
import { BEARER_REFUSALS, type TokenRule } from "../src/tokens/refusal-reasons.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };
const OTHER: TestClient = { id: "billing", secret: "another-long-secret-for-billing" };
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const NOW_S = NOW / 1000;
const TTL_S = 900;

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const pem = await generateKeyPem("EdDSA");
const privateKey = createPrivateKey(pem);
const publicJwk = (await exportJWK(createPublicKey(privateKey))) as JWK;
const KID = await calculateJwkThumbprint(publicJwk, "sha256");

function yaml(clients: readonly TestClient[], extra = ""): Promise<string> {
  return clientsYaml(clients).then((section) =>
    configFor(
      upstream.url,
      `tokens:
  ttl: 15m
  clock_tolerance: 30s
  signing: { algorithm: EdDSA, key_file: ./signing.pem }
  # Every bad token below fails from 127.0.0.1; the failure limit has its own test file.
  failure_limit: { limit: 1000, window: 1m }
${section}plans:
  default:
    rate_limit: { limit: 1000, window: 1m }
routes:
  - path: /v1/items
    methods: [GET]
  - path: /v1/open
    methods: [GET]
    auth: none
${extra}`,
    ),
  );
}

let now = NOW;
const g = await startTestGatehouse(await yaml([APP, OTHER]), {
  now: () => now,
  files: { "signing.pem": pem },
});
t.teardown(() => g.close());

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString("base64url");

/** A compact JWS over exactly these header and payload members, signed with `key` (Ed25519). */
function compact(header: object, payload: object, key: KeyObject = privateKey): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${sign(null, Buffer.from(input), key).toString("base64url")}`;
}

const HEADER = { alg: "EdDSA", typ: "at+jwt", kid: KID };
/** Valid claims with `extra` applied; an undefined member is left out of the JSON. */
function claims(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    iss: "gatehouse",
    aud: "upstream",
    sub: APP.id,
    client_id: APP.id,
    iat: NOW_S,
    exp: NOW_S + TTL_S,
    jti: randomUUID(),
    ...extra,
  };
}
const valid = (): string => compact(HEADER, claims());

function get(
  gatehouse: TestGatehouse,
  headers: Record<string, string>,
  path = "/v1/items",
): Promise<ClientResponse> {
  return send(`${gatehouse.url}${path}`, { headers });
}

/**
 * What a refusal looks like on the wire and in the log: status, challenge, body code and message,
 * the access line's reason, and whether any piece of `token` shows in the answer or that line.
 */
async function observed(
  gatehouse: TestGatehouse,
  response: ClientResponse,
  token: string,
): Promise<Record<string, unknown>> {
  const body = JSON.parse(response.body.toString("utf8")) as Record<string, unknown>;
  const id = String(response.headers["x-request-id"]);
  const line = await gatehouse.logged((entry) => entry.requestId === id && entry.msg === "request");
  const seen = JSON.stringify([response.rawHeaders, response.body.toString("utf8"), line]);
  const pieces = token.split(".").filter((piece) => piece.length >= 8);
  return {
    status: response.status,
    challenge: response.headers["www-authenticate"],
    error: body.error,
    message: body.message,
    limited: "x-ratelimit-limit" in response.headers,
    reason: line.reason,
    echoed: pieces.some((piece) => seen.includes(piece)),
  };
}

/** Sends `headers` to `path` and returns what its refusal looks like (see `observed`). */
async function refusal(
  gatehouse: TestGatehouse,
  headers: Record<string, string>,
  path = "/v1/items",
): Promise<Record<string, unknown>> {
  const token = (headers.authorization ?? "").replace(/^\S+ */, "");
  return observed(gatehouse, await get(gatehouse, headers, path), token);
}

const NO_CREDENTIALS = {
  status: 401,
  challenge: withDpop('Bearer realm="gatehouse"'),
  error: "unauthorized",
  message: "this route requires a bearer token",
  limited: false,
  reason: "bearer_missing",
  echoed: false,
};

/** A 400 for credentials that cannot be read, saying how in `detail`. */
function invalidRequest(detail: string): Record<string, unknown> {
  const words = `the request's bearer credentials are malformed: ${detail}`;
  return {
    status: 400,
    challenge: `Bearer realm="gatehouse", error="invalid_request", error_description="${words}"`,
    error: "invalid_request",
    message: words,
    limited: false,
    reason: "bearer_malformed",
    echoed: false,
  };
}
const EMPTY = invalidRequest("the Bearer scheme needs a token");
const NOT_B64TOKEN = invalidRequest("the bearer token has characters a token cannot have");

/** The 401 of `rule`, saying its words in the challenge and the body. */
function invalidToken(rule: TokenRule | "revoked"): Record<string, unknown> {
  const words = BEARER_REFUSALS[rule];
  return {
    status: 401,
    challenge: withDpop(
      `Bearer realm="gatehouse", error="invalid_token", error_description="${words}"`,
    ),
    error: "invalid_token",
    message: words,
    limited: false,
    reason: `bearer_${rule}`,
    echoed: false,
  };
}

t.beforeEach(() => {
  now = NOW;
});

t.test(
  "a valid token reaches the upstream with the client id and without Authorization",
  async (t) => {
    const before = upstream.received.length;
    const response = await get(g, { authorization: `Bearer ${valid()}` });
    t.equal(response.status, 200);
    t.equal(response.headers["x-ratelimit-limit"], "1000", "counted against the client's plan");
    const seen = upstream.received[before];
    t.equal(seen?.headers["x-client-id"], APP.id);
    t.notOk(seen && "authorization" in seen.headers, "Authorization is not forwarded");
    const issued = await obtainToken(g.url, OTHER);
    t.equal((await get(g, { authorization: `Bearer ${issued}` })).status, 200, "an issued token");
    t.equal(upstream.received.at(-1)?.headers["x-client-id"], OTHER.id);
  },
);

t.test("no credentials, or another scheme, is 401 with a bare Bearer challenge", async (t) => {
  const before = upstream.received.length;
  t.strictSame(await refusal(g, {}), NO_CREDENTIALS, "no Authorization");
  for (const value of ["Basic cmVwb3J0aW5nLWFwcDp4", "Token abc", "Bearerx abc", "Digest x=1"]) {
    t.strictSame(await refusal(g, { authorization: value }), NO_CREDENTIALS, value);
  }
  t.equal(upstream.received.length, before, "nothing forwarded");
});

t.test("the scheme is case-insensitive", async (t) => {
  for (const scheme of ["bearer", "BEARER", "bEaReR"]) {
    t.equal((await get(g, { authorization: `${scheme} ${valid()}` })).status, 200, scheme);
  }
  t.equal((await get(g, { authorization: `Bearer    ${valid()}` })).status, 200, "1*SP");
});

t.test("Bearer without a b64token is 400 invalid_request", async (t) => {
  for (const [value, expected] of [
    ["Bearer", EMPTY],
    ["Bearer ", EMPTY],
    ["Bearer    ", EMPTY],
    ["Bearer a b", NOT_B64TOKEN],
    ["Bearer a,b", NOT_B64TOKEN],
    ["Bearer a%b", NOT_B64TOKEN],
    ["Bearer =abc", NOT_B64TOKEN],
    ["Bearer a\tb", NOT_B64TOKEN],
  ] as const) {
    t.strictSame(await refusal(g, { authorization: value }), expected, JSON.stringify(value));
  }
});

t.test("two Authorization lines are 400 invalid_request", async (t) => {
  const token = valid();
  const answer = await rawRequest(
    g.port,
    `GET /v1/items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      `Authorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
  );
  const expected = invalidRequest("the request has more than one Authorization header");
  t.equal(answer.status, 400);
  t.equal(answer.headers["www-authenticate"], expected.challenge);
  t.match(JSON.parse(answer.body), { error: "invalid_request", message: expected.message });
});

t.test("access_token in the query string is 400 invalid_request and never forwarded", async (t) => {
  const before = upstream.received.length;
  const token = valid();
  for (const [query, headers] of [
    [`?access_token=${token}`, { authorization: `Bearer ${token}` }],
    [`?a=1&access_token=${token}`, {}],
  ] as const) {
    const response = await get(g, headers, `/v1/items${query}`);
    t.strictSame(
      await observed(g, response, token),
      headers.authorization
        ? invalidRequest("send the token in the Authorization header, not the URI")
        : NO_CREDENTIALS,
      query.slice(0, 20),
    );
  }
  const both = await get(
    g,
    { authorization: `Bearer ${token}` },
    `/v1/items?access_token=${token}`,
  );
  t.equal(both.status, 400);
  t.equal(upstream.received.length, before, "nothing forwarded");
  const unrelated = await get(
    g,
    { authorization: `Bearer ${token}` },
    "/v1/items?my_access_token=1",
  );
  t.equal(unrelated.status, 200, "a parameter that only contains the name is left alone");
});

t.test(
  "on auth: none routes the query is forwarded byte for byte, access_token included",
  async (t) => {
    // gatehouse reads no token on an open route, so it has nothing to refuse or strip there.
    const query = `access_token=${valid()}&a=%2f+b;c&access_token=`;
    const response = await get(g, {}, `/v1/open?${query}`);
    t.equal(response.status, 200);
    const seen = upstream.received.at(-1);
    t.equal(seen?.url, `/v1/open?${query}`, "the query as sent");
    t.notOk(seen && "x-client-id" in seen.headers, "no client identified");
  },
);

t.test("no log line holds a bearer token, valid, refused or from the query", async (t) => {
  const token = valid();
  const refused = compact(HEADER, claims({ iss: "someone-else" }));
  const inQuery = valid();
  const requests: Array<[string, Record<string, string>, string, number]> = [
    ["valid", { authorization: `Bearer ${token}` }, "/v1/items", 200],
    ["refused", { authorization: `Bearer ${refused}` }, "/v1/items", 401],
    ["query only", {}, `/v1/items?access_token=${inQuery}`, 401],
    [
      "query and header",
      { authorization: `Bearer ${token}` },
      `/v1/items?access_token=${inQuery}`,
      400,
    ],
    ["query on an open route", {}, `/v1/open?access_token=${inQuery}`, 200],
  ];
  const ids: string[] = [];
  for (const [label, headers, path, status] of requests) {
    const response = await get(g, headers, path);
    t.equal(response.status, status, label);
    ids.push(String(response.headers["x-request-id"]));
  }
  // Access lines are written once each response has closed, which may follow the client's read.
  const lines = await Promise.all(
    ids.map((id) => g.logged((line) => line.requestId === id && line.msg === "request")),
  );
  t.strictSame(
    lines.map((line) => line.status),
    requests.map((request) => request[3]),
    "every request's access line was captured, with its status",
  );
  const text = JSON.stringify(g.logs);
  for (const [label, value] of [
    ["valid", token],
    ["refused", refused],
    ["from the query", inQuery],
  ] as const) {
    t.notOk(text.includes(value), `${label}: not logged`);
    t.notOk(text.includes(value.split(".")[2] as string), `${label}: its signature not logged`);
  }
});

t.test("alg none, another algorithm, and key confusion are 401 invalid_token", async (t) => {
  for (const alg of ["none", "None", "NONE"]) {
    const input = `${b64({ ...HEADER, alg })}.${b64(claims())}`;
    // Without a signature it is not even a JWS; with one, its alg is refused before any key.
    for (const [token, rule] of [
      [`${input}.`, "not_a_jwt"],
      [`${input}.AAAA`, "algorithm"],
    ] as const) {
      t.strictSame(
        await refusal(g, { authorization: `Bearer ${token}` }),
        invalidToken(rule),
        `${alg} ${token.slice(-5)}`,
      );
    }
  }
  const hs = await new SignJWT(claims())
    .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: KID })
    .sign(new TextEncoder().encode("a-secret-of-at-least-thirty-two-bytes!!"));
  t.strictSame(
    await refusal(g, { authorization: `Bearer ${hs}` }),
    invalidToken("algorithm"),
    "HS256",
  );
  const spki = createPublicKey(privateKey).export({ format: "pem", type: "spki" }) as string;
  const confused = await new SignJWT(claims())
    .setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: KID })
    .sign(new TextEncoder().encode(spki));
  t.strictSame(
    await refusal(g, { authorization: `Bearer ${confused}` }),
    invalidToken("algorithm"),
    "public key as HMAC key",
  );
});

t.test("exp beyond the leeway is 401 invalid_token; within it the token is accepted", async (t) => {
  const token = valid();
  t.equal((await get(g, { authorization: `Bearer ${token}` })).status, 200, "verified and cached");
  now = NOW + (TTL_S + 29) * 1000;
  t.equal((await get(g, { authorization: `Bearer ${token}` })).status, 200, "29 s after exp");
  now = NOW + (TTL_S + 31) * 1000;
  t.strictSame(
    await refusal(g, { authorization: `Bearer ${token}` }),
    invalidToken("expired"),
    "31 s after exp, even though it was cached",
  );
  t.equal(BEARER_REFUSALS.expired, "the token has expired");
});

t.test("nbf or iat in the future, beyond the leeway, is 401 invalid_token", async (t) => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ["nbf in 1 h", { nbf: NOW_S + 3600 }],
    ["iat in 1 h", { iat: NOW_S + 3600, exp: NOW_S + 3600 + TTL_S }],
  ];
  for (const [label, extra] of cases) {
    t.strictSame(
      await refusal(g, { authorization: `Bearer ${compact(HEADER, claims(extra))}` }),
      invalidToken("not_yet_valid"),
      label,
    );
  }
  const soon = compact(HEADER, claims({ nbf: NOW_S + 20 }));
  t.equal((await get(g, { authorization: `Bearer ${soon}` })).status, 200, "nbf within the leeway");
});

t.test("missing or wrong claims and typ are 401 invalid_token", async (t) => {
  const cases: Array<[string, object, object, TokenRule]> = [
    ["exp missing", HEADER, claims({ exp: undefined }), "claims"],
    ["exp a string", HEADER, claims({ exp: String(NOW_S + TTL_S) }), "claims"],
    ["iat missing", HEADER, claims({ iat: undefined }), "claims"],
    ["client_id missing", HEADER, claims({ client_id: undefined }), "claims"],
    ["client_id differs from sub", HEADER, claims({ client_id: OTHER.id }), "claims"],
    ["scope not a string", HEADER, claims({ scope: ["a"] }), "claims"],
    // Older than the ttl: its own issuer would not have made it live that long.
    [
      "a lifetime longer than the ttl",
      HEADER,
      claims({ iat: NOW_S - TTL_S - 60, exp: NOW_S + 60 }),
      "expired",
    ],
    ["wrong iss", HEADER, claims({ iss: "someone-else" }), "issuer"],
    ["no iss", HEADER, claims({ iss: undefined }), "issuer"],
    ["wrong aud", HEADER, claims({ aud: "other" }), "audience"],
    ["aud array without ours", HEADER, claims({ aud: ["a", "b"] }), "audience"],
    ["no aud", HEADER, claims({ aud: undefined }), "audience"],
    ["typ JWT", { ...HEADER, typ: "JWT" }, claims(), "typ"],
    ["no typ", { alg: "EdDSA", kid: KID }, claims(), "typ"],
  ];
  for (const [label, header, payload, rule] of cases) {
    t.strictSame(
      await refusal(g, { authorization: `Bearer ${compact(header, payload)}` }),
      invalidToken(rule),
      label,
    );
  }
  const withOurs = compact(HEADER, claims({ aud: ["other", "upstream"] }));
  t.equal(
    (await get(g, { authorization: `Bearer ${withOurs}` })).status,
    200,
    "an aud array with ours",
  );
  const mediaType = compact({ ...HEADER, typ: "application/at+jwt" }, claims());
  t.equal(
    (await get(g, { authorization: `Bearer ${mediaType}` })).status,
    200,
    "typ application/at+jwt",
  );
});

t.test("unknown crit, odd or unknown kid, jku and embedded jwk are 401", async (t) => {
  const attacker = createPrivateKey(await generateKeyPem("EdDSA"));
  const attackerJwk = await exportJWK(createPublicKey(attacker));
  const cases: Array<[string, object, TokenRule, KeyObject?]> = [
    ["crit", { ...HEADER, crit: ["x-must-understand"], "x-must-understand": true }, "not_a_jwt"],
    ["kid path", { ...HEADER, kid: "../../dev/null" }, "unknown_kid"],
    ["kid SQL", { ...HEADER, kid: "' OR 1=1 --" }, "unknown_kid"],
    ["no kid", { alg: "EdDSA", typ: "at+jwt" }, "unknown_kid"],
    [
      "jku with an unknown kid",
      { ...HEADER, kid: "k1", jku: "http://127.0.0.1:1/jwks" },
      "unknown_kid",
      attacker,
    ],
    ["embedded jwk", { ...HEADER, jwk: attackerJwk }, "signature", attacker],
    ["our kid, another key", HEADER, "signature", attacker],
  ];
  for (const [label, header, rule, key] of cases) {
    t.strictSame(
      await refusal(g, { authorization: `Bearer ${compact(header, claims(), key)}` }),
      invalidToken(rule),
      label,
    );
  }
});

t.test("tampered, truncated and non-canonical tokens are 401 invalid_token", async (t) => {
  const token = valid();
  const [h, , s] = token.split(".");
  const tampered = `${h}.${b64(claims({ sub: OTHER.id, client_id: OTHER.id }))}.${s}`;
  for (const [label, value, rule] of [
    ["tampered payload", tampered, "signature"],
    ["stripped signature", `${h}.${token.split(".")[1]}.`, "not_a_jwt"],
    ["not.a.jwt", "not.a.jwt", "not_a_jwt"],
    ["..", "..", "not_a_jwt"],
    ["five segments", `${token}.a.b`, "not_a_jwt"],
    ["padding", `${token}=`, "not_a_jwt"],
    ["double padding", `${token}==`, "not_a_jwt"],
    ["two segments", `${h}.${s}`, "not_a_jwt"],
  ] as const) {
    t.strictSame(await refusal(g, { authorization: `Bearer ${value}` }), invalidToken(rule), label);
  }
});

t.test(
  "a token over 4 KiB is 400 invalid_request; a header section over 16 KiB is 431",
  async (t) => {
    const big = compact(HEADER, claims({ pad: "x".repeat(4000) }));
    t.ok(big.length > 4096);
    t.strictSame(
      await refusal(g, { authorization: `Bearer ${big}` }),
      invalidRequest("the bearer token must be at most 4096 bytes"),
    );
    const huge = await rawRequest(
      g.port,
      `GET /v1/items HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${"a".repeat(17000)}\r\nConnection: close\r\n\r\n`,
    );
    t.equal(huge.status, 431);
  },
);

t.test("identity headers from the client are replaced by the verified client id", async (t) => {
  const token = valid();
  await send(`${g.url}/v1/items`, {
    headers: {
      authorization: `Bearer ${token}`,
      "x-client-id": "admin",
      connection: "close, X-Client-Id",
    },
  });
  t.strictSame(upstream.received.at(-1)?.headers["x-client-id"], APP.id, "only the verified id");
  await send(`${g.url}/v1/open`, { headers: { "x-client-id": "admin" } });
  t.notOk(
    "x-client-id" in (upstream.received.at(-1)?.headers ?? {}),
    "removed on auth: none routes",
  );
});

t.test(
  "Proxy-Authorization is dropped; Authorization only with forward_authorization",
  async (t) => {
    await get(g, {
      authorization: `Bearer ${valid()}`,
      "proxy-authorization": "Basic Zm9vOmJhcg==",
    });
    const seen = upstream.received.at(-1)?.headers ?? {};
    t.notOk("proxy-authorization" in seen);
    t.notOk("authorization" in seen);

    const forwarding = await startTestGatehouse(
      await yaml([APP], "").then((text) =>
        text.replace(
          "  timeout: 2s\n",
          "  timeout: 2s\n  forward_authorization: true\n  identity_header: X-Auth-Client\n",
        ),
      ),
      { now: () => now, files: { "signing.pem": pem } },
    );
    t.teardown(() => forwarding.close());
    const token = valid();
    const response = await get(forwarding, {
      authorization: `Bearer ${token}`,
      "x-auth-client": "admin",
    });
    t.equal(response.status, 200);
    const forwarded = upstream.received.at(-1)?.headers ?? {};
    t.equal(forwarded.authorization, `Bearer ${token}`, "forwarded as received");
    t.equal(forwarded["x-auth-client"], APP.id, "the configured identity header");
    t.notOk("x-client-id" in forwarded);
  },
);

t.test("a client removed from the config: its tokens are refused, cached or not", async (t) => {
  const local = await startTestGatehouse(await yaml([APP, OTHER]), {
    now: () => now,
    files: { "signing.pem": pem },
  });
  t.teardown(() => local.close());
  const token = await obtainToken(local.url, OTHER);
  t.equal((await get(local, { authorization: `Bearer ${token}` })).status, 200);
  await local.writeConfig(await yaml([APP]));
  t.equal(await local.gatehouse.reload(), "success");
  t.strictSame(
    await refusal(local, { authorization: `Bearer ${token}` }),
    invalidToken("client_unknown"),
  );
  t.equal(
    (await get(local, { authorization: `Bearer ${valid()}` })).status,
    200,
    "others still pass",
  );
});

t.test("previous_keys verify during rotation; a retired key is refused", async (t) => {
  const next = await generateKeyPem("EdDSA");
  const oldPublic = createPublicKey(privateKey).export({ format: "pem", type: "spki" }) as string;
  const local = await startTestGatehouse(await yaml([APP]), {
    now: () => now,
    files: { "signing.pem": pem, "next.pem": next, "old.pub.pem": oldPublic },
  });
  t.teardown(() => local.close());
  const oldToken = await obtainToken(local.url, APP);

  const rotated = (await yaml([APP], "")).replace(
    "key_file: ./signing.pem }",
    "key_file: ./next.pem }\n  previous_keys: [./old.pub.pem]",
  );
  await local.writeConfig(rotated);
  t.equal(await local.gatehouse.reload(), "success");
  t.equal(
    (await get(local, { authorization: `Bearer ${oldToken}` })).status,
    200,
    "old key still accepted",
  );
  const newToken = await obtainToken(local.url, APP);
  t.not(newToken.split(".")[0], oldToken.split(".")[0], "new tokens name the new kid");
  t.equal((await get(local, { authorization: `Bearer ${newToken}` })).status, 200);
  const jwks = (await (await fetch(`${local.url}/.well-known/jwks.json`)).json()) as {
    keys: Array<{ kid: string }>;
  };
  t.equal(jwks.keys.length, 2, "the JWKS lists both keys");
  t.ok(
    jwks.keys.some((key) => key.kid === KID),
    "the previous key's kid",
  );

  await local.writeConfig((await yaml([APP], "")).replace("./signing.pem", "./next.pem"));
  t.equal(await local.gatehouse.reload(), "success");
  t.strictSame(
    await refusal(local, { authorization: `Bearer ${oldToken}` }),
    invalidToken("unknown_kid"),
    "retired",
  );
  t.equal((await get(local, { authorization: `Bearer ${newToken}` })).status, 200);
});

t.test("a generated key is kept across reloads, so its tokens stay valid", async (t) => {
  const withoutKey = (ttl: string) =>
    clientsYaml([APP]).then((section) =>
      configFor(
        upstream.url,
        `tokens:\n  ttl: ${ttl}\n${section}routes:\n  - path: /v1/items\n    methods: [GET]\n`,
      ),
    );
  const local = await startTestGatehouse(await withoutKey("15m"), { now: () => now });
  t.teardown(() => local.close());
  t.ok(
    local.logs.some((line) => line.level === "warn" && String(line.msg).includes("no signing key")),
    "a warning",
  );
  const token = await obtainToken(local.url, APP);
  await local.writeConfig(await withoutKey("20m"));
  t.equal(await local.gatehouse.reload(), "success");
  t.equal((await get(local, { authorization: `Bearer ${token}` })).status, 200);
});

t.test(
  "HS256 with secret_env, and ES256: issued tokens verify; other algorithms do not",
  async (t) => {
    const secret = "an-hs256-secret-that-is-long-enough-0123456789";
    const hs = await startTestGatehouse(
      (await yaml([APP])).replace(
        "{ algorithm: EdDSA, key_file: ./signing.pem }",
        "{ algorithm: HS256, secret_env: TEST_HS_SECRET }",
      ),
      { now: () => now, env: { TEST_HS_SECRET: secret } },
    );
    t.teardown(() => hs.close());
    const hsToken = await obtainToken(hs.url, APP);
    t.equal(
      JSON.parse(Buffer.from(hsToken.split(".")[0] as string, "base64url").toString()).alg,
      "HS256",
    );
    t.equal((await get(hs, { authorization: `Bearer ${hsToken}` })).status, 200);
    t.strictSame(
      await refusal(hs, { authorization: `Bearer ${valid()}` }),
      invalidToken("algorithm"),
      "EdDSA refused",
    );
    t.strictSame(
      await (await fetch(`${hs.url}/.well-known/jwks.json`)).json(),
      { keys: [] },
      "no HS256 key published",
    );

    const es = await startTestGatehouse(
      (await yaml([APP])).replace("algorithm: EdDSA", "algorithm: ES256"),
      { now: () => now, files: { "signing.pem": await generateKeyPem("ES256") } },
    );
    t.teardown(() => es.close());
    const esToken = await obtainToken(es.url, APP);
    t.equal((await get(es, { authorization: `Bearer ${esToken}` })).status, 200);
    const jwks = (await (await fetch(`${es.url}/.well-known/jwks.json`)).json()) as { keys: JWK[] };
    t.match(jwks.keys, [{ kty: "EC", crv: "P-256", alg: "ES256" }]);
    const forged = await new SignJWT(claims())
      .setProtectedHeader({ alg: "EdDSA", typ: "at+jwt", kid: jwks.keys[0]?.kid as string })
      .sign(await importPKCS8(pem, "EdDSA"));
    t.strictSame(
      await refusal(es, { authorization: `Bearer ${forged}` }),
      invalidToken("algorithm"),
      "EdDSA on ES256",
    );
  },
);

t.test("an opaque token is refused: gatehouse verifies JWT access tokens only", async (t) => {
  // RFC 6749 §5.1's example access token, and a reference token with one dot (Ory Hydra's form).
  for (const opaque of ["2YotnFZFEjr1zCsicMWpAA", "ory_at_mF3lKtbA2sB9.x7QhPq0Zr5vVJ1kY"]) {
    const answer = await refusal(g, { authorization: `Bearer ${opaque}` });
    t.strictSame(answer, invalidToken("not_a_jwt"), opaque);
    t.match(answer.challenge, /error_description="gatehouse verifies JWT access tokens only/);
  }
});

// RFC 6750 §3: error_description = *( %x20-21 / %x23-5B / %x5D-7E ), so no quote or backslash
// can end the parameter early; every refusal's words are fixed and fit.
t.test("every refusal's words fit in an error_description", async (t) => {
  for (const [rule, words] of Object.entries(BEARER_REFUSALS)) {
    t.match(words, /^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/, rule);
  }
});

// The manual's table is what an operator reads a log line's reason against.
t.test("docs/tokens.md lists every refusal's reason with its words", async (t) => {
  const table = section(readManual("docs/tokens.md"), "Why a bearer token is refused");
  const rows = [...table.matchAll(/^\| `(bearer_[a-z_]+)`\s*\|(.*)$/gm)];
  t.strictSame(
    rows.map((row) => row[1]),
    Object.keys(BEARER_REFUSALS).map((rule) => `bearer_${rule}`),
  );
  for (const [rule, words] of Object.entries(BEARER_REFUSALS)) {
    const row = rows.find((entry) => entry[1] === `bearer_${rule}`)?.[2] ?? "";
    t.ok(row.includes(`| ${words}`), `${rule}: its words`);
  }
});

t.test("refusals are counted in the failures metric by their rule", async (t) => {
  const text = await scrape(g);
  const rules = ["missing", "malformed", "not_a_jwt", "signature", "algorithm", "expired"];
  rules.push("not_yet_valid", "issuer", "audience", "unknown_kid", "typ", "claims");
  for (const rule of rules) {
    t.match(
      text,
      new RegExp(`^gatehouse_auth_failures_total\\{reason="bearer_${rule}"\\} [1-9]\\d*$`, "m"),
      rule,
    );
  }
  t.notMatch(text, /reason="bearer_invalid"/, "the old catch-all reason is gone");
});
