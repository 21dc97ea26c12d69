/**
 * private_key_jwt (RFC 7523 §2.2 and §3) through real sockets: assertions signed with jose for
 * ES256 and EdDSA clients are accepted once, with typ client-authentication+jwt, JWT or none, and
 * without kid against a client with two keys; authlib's hour-long assertion is accepted and its
 * jti held until its exp, unless `tokens.assertion_max_lifetime` is shorter; every assertion a
 * careful server refuses is answered 401 invalid_client naming the rule it broke (never quoting
 * the assertion) and logged with its client and reason; two methods at once are 400.
 */
import { randomBytes } from "node:crypto";
import t from "tap";
import { SignJWT } from "jose";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";
import { basic, clientsYaml } from "./helpers/tokens.js";
import {
  assertion,
  assertionRequest,
  jwksFiles,
  JWT_BEARER,
  keyClient,
  keyClientsYaml,
  postForm,
  type AssertionClaims,
  type KeyClient,
} from "./helpers/assertions.js";

const ISSUER = "https://auth.example.com";
const START = Date.UTC(2026, 0, 5, 12);
let clock = START;
const now = (): number => clock;

const es = await keyClient("batch-es", "ES256");
const ed = await keyClient("batch-ed", "EdDSA");
// A client rotating keys lists two of one type: an assertion without kid may be either.
const oldKey = await keyClient("batch-rotating", "ES256");
const newKey = await keyClient("batch-rotating", "ES256");
const rotating = {
  ...newKey,
  jwks: JSON.stringify({ keys: [oldKey.jwk, newKey.jwk] }),
};
const SECRET_CLIENT = { id: "reporting-app", secret: "a3f1c9d2e8b7a6f5c4d3e2f1a0b9c8d7" };
const upstream = await startUpstream();
t.teardown(() => upstream.close());

async function start(failureLimit: number, tokens = "") {
  const yaml = configFor(
    upstream.url,
    `tokens:
  issuer: ${ISSUER}
  failure_limit: { limit: ${failureLimit}, window: 1h }
${tokens}${await clientsYaml([SECRET_CLIENT])}${keyClientsYaml([es, ed, rotating])}routes:
  - path: /v1/items
    methods: [GET]
`,
  );
  return startTestGatehouse(yaml, { now, files: jwksFiles([es, ed, rotating]) });
}

const g = await start(1000);
t.teardown(() => g.close());

const INVALID_CLIENT = {
  error: "invalid_client",
  error_description: "client authentication failed",
};

const REPLAYED = "the client assertion's jti was used before; sign a new one for each request";

/**
 * An assertion as authlib's PrivateKeyJWT signs one: header typ JWT, iat now, exp an hour later,
 * a 36-character jti. Its aud is the token_endpoint it is given, here the issuer.
 */
function authlibStyle(client: KeyClient, nowMs: number, claims: AssertionClaims = {}) {
  const iat = Math.floor(nowMs / 1000);
  const jti = randomBytes(27).toString("base64url");
  return assertion(client, nowMs, ISSUER, { iat, exp: iat + 3600, jti, ...claims }, { typ: "JWT" });
}

/** The 401 invalid_client of an assertion that broke a rule, with its description. */
function refusedFor(description: string) {
  return { error: "invalid_client", error_description: description };
}

for (const client of [es, ed]) {
  t.test(`an ${client.alg} assertion gets a token that opens a protected route`, async (t) => {
    const answer = await assertionRequest(g.url, await assertion(client, now(), ISSUER));
    t.equal(answer.status, 200);
    t.equal(answer.headers["cache-control"], "no-store");
    const token = answer.json.access_token as string;
    const response = await fetch(`${g.url}/v1/items`, {
      headers: { authorization: `Bearer ${token}` },
    });
    t.equal(response.status, 200);
    t.equal(upstream.received.at(-1)?.headers["x-client-id"], client.id);
  });
}

t.test("client_id may accompany the assertion, naming its sub", async (t) => {
  const same = await assertionRequest(g.url, await assertion(es, now(), ISSUER), [
    ["client_id", es.id],
  ]);
  t.equal(same.status, 200);
  const other = await assertionRequest(g.url, await assertion(es, now(), ISSUER), [
    ["client_id", ed.id],
  ]);
  t.equal(other.status, 401);
  t.strictSame(other.json, refusedFor("client_id must name the client assertion's sub"));
});

t.test("typ client-authentication+jwt or JWT is accepted, another typ refused", async (t) => {
  const typed = await assertion(es, now(), ISSUER, {}, { typ: "client-authentication+jwt" });
  t.equal((await assertionRequest(g.url, typed)).status, 200);
  // RFC 7519 §5.1: what the MCP SDK, authlib and Spring write.
  const jwt = await assertion(es, now(), ISSUER, {}, { typ: "JWT" });
  t.equal((await assertionRequest(g.url, jwt)).status, 200);
  // RFC 7515 §4.1.9: a media type, in any case, with or without its application/ prefix.
  const spellings = [
    "jwt",
    "application/jwt",
    "application/JWT",
    "Client-Authentication+JWT",
    "application/client-authentication+jwt",
  ];
  for (const typ of spellings) {
    const same = await assertionRequest(g.url, await assertion(es, now(), ISSUER, {}, { typ }));
    t.equal(same.status, 200, typ);
  }
  for (const typ of ["at+jwt", "application/at+jwt", "text/jwt", 123, ["JWT"], null]) {
    const other = await assertionRequest(g.url, await assertion(es, now(), ISSUER, {}, { typ }));
    t.equal(other.status, 401, String(typ));
    t.strictSame(
      other.json,
      refusedFor("the client assertion's typ must be client-authentication+jwt or JWT, or absent"),
      String(typ),
    );
  }
});

t.test("an assertion without kid is tried against each of its client's keys", async (t) => {
  for (const key of [oldKey, newKey]) {
    const signed = await assertion(key, now(), ISSUER, {}, { kid: undefined });
    t.equal((await assertionRequest(g.url, signed)).status, 200, String(key.jwk.kid));
  }
  const withKid = await assertion(oldKey, now(), ISSUER);
  t.equal((await assertionRequest(g.url, withKid)).status, 200, "a kid still chooses one key");
  const stranger = { ...(await keyClient(rotating.id, "ES256")) };
  const forged = await assertion(stranger, now(), ISSUER, {}, { kid: undefined });
  const refused = await assertionRequest(g.url, forged);
  t.equal(refused.status, 401, "a key the client does not list");
  t.strictSame(
    refused.json,
    refusedFor("the client assertion's signature does not verify with the client's keys"),
  );
  const unknownKid = await assertionRequest(g.url, await assertion(stranger, now(), ISSUER));
  t.strictSame(
    unknownKid.json,
    refusedFor("no key of the client matches the client assertion's kid and alg"),
  );
});

t.test(
  "aud: the issuer alone; the token endpoint URL or other audiences are refused",
  async (t) => {
    const alone = await assertion(es, now(), ISSUER, { aud: [ISSUER] });
    t.equal((await assertionRequest(g.url, alone)).status, 200, "an array of the issuer alone");
    for (const aud of [`${ISSUER}/oauth/token`, `${g.url}/oauth/token`, [ISSUER, "https://rs"]]) {
      const refused = await assertionRequest(g.url, await assertion(es, now(), ISSUER, { aud }));
      t.equal(refused.status, 401, JSON.stringify(aud));
      t.strictSame(
        refused.json,
        refusedFor(`the client assertion's aud must be the issuer identifier alone: ${ISSUER}`),
      );
      t.equal(refused.headers["www-authenticate"], 'Basic realm="gatehouse"');
    }
  },
);

t.test("a refused assertion: 401 invalid_client naming the rule it broke", async (t) => {
  const seconds = Math.floor(now() / 1000);
  const pub = Buffer.from(es.jwk.x as string, "base64url");
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const claims = { iss: es.id, sub: es.id, aud: ISSUER, jti: "n", exp: seconds + 60 };
  const alg = "the client assertion's alg must be one its client's keys allow: ES256";
  const cases: Array<[string, Promise<string>, string]> = [
    [
      "expired beyond the tolerance",
      assertion(es, now(), ISSUER, { exp: seconds - 31 }),
      "the client assertion has expired (exp)",
    ],
    [
      "exp more than assertion_max_lifetime (1h) and the tolerance ahead",
      assertion(es, now(), ISSUER, { exp: seconds + 3631 }),
      "the client assertion's exp must be at most 3600 seconds ahead",
    ],
    [
      "no exp",
      assertion(es, now(), ISSUER, { exp: undefined }),
      "the client assertion must carry the exp claim",
    ],
    [
      "no jti",
      assertion(es, now(), ISSUER, { jti: undefined }),
      "the client assertion must carry the jti claim",
    ],
    [
      "an empty jti",
      assertion(es, now(), ISSUER, { jti: "" }),
      "the client assertion's jti must be a non-empty string",
    ],
    [
      "iss of another client",
      assertion(es, now(), ISSUER, { iss: ed.id }),
      "the client assertion's iss and sub must both be the client id",
    ],
    [
      "nbf in the future",
      assertion(es, now(), ISSUER, { nbf: seconds + 60 }),
      "the client assertion's nbf is in the future",
    ],
    [
      "sub of another client",
      assertion(es, now(), ISSUER, { sub: ed.id }),
      "the client assertion's alg must be one its client's keys allow: EdDSA",
    ],
    [
      "sub of a secret client",
      assertion(es, now(), ISSUER, { sub: SECRET_CLIENT.id }),
      "the client assertion's sub names no client that authenticates with private_key_jwt",
    ],
    [
      "no aud",
      assertion(es, now(), ISSUER, { aud: undefined }),
      "the client assertion must carry the aud claim",
    ],
    [
      "alg none",
      Promise.resolve(`${encode({ alg: "none" })}.${encode(claims)}.`),
      "the client assertion is not a compact JWS",
    ],
    ["alg none, signed", Promise.resolve(`${encode({ alg: "none" })}.${encode(claims)}.c2ln`), alg],
    [
      "HS256 keyed with the public key's bytes",
      new SignJWT(claims).setProtectedHeader({ alg: "HS256", kid: es.jwk.kid }).sign(pub),
      alg,
    ],
    ["signed by another client's key", assertion({ ...ed, id: es.id }, now(), ISSUER), alg],
    ["not a JWS", Promise.resolve("not-a-jws"), "the client assertion is not a compact JWS"],
  ];
  for (const [name, signed, description] of cases) {
    const sent = await signed;
    const answer = await assertionRequest(g.url, sent);
    t.equal(answer.status, 401, name);
    t.strictSame(answer.json, refusedFor(description), name);
    t.equal(answer.headers["www-authenticate"], 'Basic realm="gatehouse"', name);
    t.notOk(answer.body.toString("utf8").includes(sent), `${name}: the assertion is not echoed`);
  }
});

t.test("a refusal's log line names the client and the rule, never the assertion", async (t) => {
  const sent = await assertion(ed, now(), ISSUER, { exp: Math.floor(now() / 1000) - 600 });
  const answer = await assertionRequest(g.url, sent);
  const line = await g.logged((entry) => entry.requestId === answer.headers["x-request-id"]);
  t.match(line, {
    msg: "client authentication refused",
    client: ed.id,
    reason: "assertion_expired",
  });
  const written = JSON.stringify(g.logs);
  t.notOk(written.includes(sent.split(".")[2] as string), "no line holds the assertion");
  const wrong = await postForm(g.url, "/oauth/token", [
    ["client_id", SECRET_CLIENT.id],
    ["client_secret", "not-the-secret"],
  ]);
  t.strictSame(wrong.json, INVALID_CLIENT, "a secret's refusal says no more than before");
  const secretLine = await g.logged(
    (entry) => entry.requestId === wrong.headers["x-request-id"] && entry.reason !== undefined,
  );
  t.match(secretLine, { client: SECRET_CLIENT.id, reason: "wrong_secret" });
  t.notOk(JSON.stringify(g.logs).includes("not-the-secret"), "no line holds the secret");
});

t.test("an assertion within the clock tolerance is accepted", async (t) => {
  const seconds = Math.floor(now() / 1000);
  const late = await assertion(ed, now(), ISSUER, { exp: seconds - 29 });
  t.equal((await assertionRequest(g.url, late)).status, 200);
});

t.test("a jti is accepted once until its exp", async (t) => {
  const signed = await assertion(ed, now(), ISSUER, { jti: "once" });
  t.equal((await assertionRequest(g.url, signed)).status, 200);
  const replay = await assertionRequest(g.url, signed);
  t.equal(replay.status, 401, "the same assertion again");
  t.strictSame(replay.json, refusedFor(REPLAYED));
  const again = await assertion(ed, now(), ISSUER, { jti: "once" });
  t.equal((await assertionRequest(g.url, again)).status, 401, "a new assertion, the same jti");
  const other = await assertion(es, now(), ISSUER, { jti: "once" });
  t.equal((await assertionRequest(g.url, other)).status, 200, "jtis are per client");
});

t.test(
  "authlib's assertion, an hour long, gets a token; its jti is held until its exp",
  async (t) => {
    const iat = Math.floor(now() / 1000);
    const jti = "authlib-hour";
    const signed = await authlibStyle(es, now(), { jti });
    const answer = await assertionRequest(g.url, signed);
    t.equal(answer.status, 200);
    const before = upstream.received.length;
    const response = await fetch(`${g.url}/v1/items`, {
      headers: { authorization: `Bearer ${answer.json.access_token as string}` },
    });
    t.equal(response.status, 200);
    t.equal(upstream.received[before]?.headers["x-client-id"], es.id);
    const edge = await authlibStyle(es, now(), { exp: iat + 3630 });
    t.equal((await assertionRequest(g.url, edge)).status, 200, "an hour and the tolerance ahead");

    // The last second the assertion verifies (exp plus the tolerance): still a replay.
    clock = (iat + 3629) * 1000;
    const replay = await assertionRequest(g.url, signed);
    t.equal(replay.status, 401);
    t.strictSame(replay.json, refusedFor(REPLAYED), "the same assertion again");
    const sameJti = await assertionRequest(g.url, await assertion(es, now(), ISSUER, { jti }));
    t.strictSame(sameJti.json, refusedFor(REPLAYED), "a new assertion with its jti");

    clock = (iat + 3630) * 1000;
    const ended = await assertionRequest(g.url, signed);
    t.strictSame(ended.json, refusedFor("the client assertion has expired (exp)"), "it has ended");
    const reused = await assertionRequest(g.url, await assertion(es, now(), ISSUER, { jti }));
    t.equal(reused.status, 200, "its jti is forgotten once it could no longer verify");
  },
);

t.test("tokens.assertion_max_lifetime: 5m refuses authlib's hour-long assertion", async (t) => {
  const short = await start(1000, "  assertion_max_lifetime: 5m\n");
  t.teardown(() => short.close());
  const iat = Math.floor(now() / 1000);
  const hour = await assertionRequest(short.url, await authlibStyle(es, now()));
  t.equal(hour.status, 401);
  t.strictSame(
    hour.json,
    refusedFor("the client assertion's exp must be at most 300 seconds ahead"),
  );
  const line = await short.logged((entry) => entry.requestId === hour.headers["x-request-id"]);
  t.match(line, { client: es.id, reason: "assertion_lifetime" });
  const beyond = await authlibStyle(es, now(), { exp: iat + 331 });
  t.equal((await assertionRequest(short.url, beyond)).status, 401, "5m and the tolerance, and 1s");
  const within = await authlibStyle(es, now(), { exp: iat + 330 });
  t.equal((await assertionRequest(short.url, within)).status, 200, "5m and the tolerance");
});

t.test("an assertion and a secret at once are 400 invalid_request", async (t) => {
  const signed = await assertion(es, now(), ISSUER);
  const withBasic = await postForm(
    g.url,
    "/oauth/token",
    [
      ["client_assertion_type", JWT_BEARER],
      ["client_assertion", signed],
    ],
    { authorization: basic(SECRET_CLIENT.id, SECRET_CLIENT.secret) },
  );
  t.equal(withBasic.status, 400);
  t.equal(withBasic.json.error, "invalid_request");
  const withSecret = await assertionRequest(g.url, signed, [["client_secret", "x"]]);
  t.equal(withSecret.status, 400);
  t.equal(withSecret.json.error, "invalid_request");
  const half = await postForm(g.url, "/oauth/token", [["client_assertion", signed]]);
  t.equal(half.status, 400, "an assertion without its type");
  const otherType = await postForm(g.url, "/oauth/token", [
    ["client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:saml2-bearer"],
    ["client_assertion", signed],
  ]);
  t.equal(otherType.status, 401, "an assertion type not served");
  t.strictSame(otherType.json, refusedFor(`client_assertion_type must be ${JWT_BEARER}`));
});

t.test("a private_key_jwt client cannot use a secret", async (t) => {
  const answer = await postForm(g.url, "/oauth/token", [
    ["client_id", es.id],
    ["client_secret", "anything"],
  ]);
  t.equal(answer.status, 401);
  t.strictSame(answer.json, INVALID_CLIENT);
});

t.test("refused assertions count against the address's failure limit", async (t) => {
  const limited = await start(2);
  t.teardown(() => limited.close());
  const stale = await assertion(es, now(), ISSUER, { exp: Math.floor(now() / 1000) - 600 });
  t.equal((await assertionRequest(limited.url, stale)).status, 401);
  const signed = await assertion(es, now(), ISSUER, { jti: "counted" });
  t.equal((await assertionRequest(limited.url, signed)).status, 200, "a success is not counted");
  t.equal((await assertionRequest(limited.url, signed)).status, 401, "a replay is a failure");
  const good = await assertionRequest(limited.url, await assertion(es, now(), ISSUER));
  t.equal(good.status, 429, "beyond the limit, a good assertion too");
  t.equal(good.json.error, "rate_limited");
});

t.test("a used jti is forgotten once its assertion has ended", async (t) => {
  const signed = await assertion(es, now(), ISSUER, { jti: "ends" });
  t.equal((await assertionRequest(g.url, signed)).status, 200);
  clock += 120_000;
  const later = await assertion(es, now(), ISSUER, { jti: "ends" });
  t.equal((await assertionRequest(g.url, later)).status, 200, "after exp + tolerance");
});
