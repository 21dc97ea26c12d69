/**
 * The token endpoint through real sockets (RFC 6749 §4.4, §5; docs/tokens.md): each way a token
 * request can be wrong, asserting status, headers and the body's error code.
 */
import t from "tap";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { rawRequest } from "./helpers/raw.js";
import {
  basic,
  clientsYaml,
  form,
  formEncode,
  postToken,
  type TestClient,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { scrape } from "./helpers/metrics.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };
// RFC 6749 §2.3.1: characters that change meaning once form-encoded.
const ODD: TestClient = { id: "odd-client", secret: "a%3Ab p+q:r/é" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    // The failure limit is high here; its own test below runs a gatehouse with a small one.
    `tokens:\n  ttl: 15m\n  failure_limit: { limit: 1000, window: 1m }\n${await clientsYaml([APP, ODD])}`,
  ),
  { now: () => NOW },
);
t.teardown(() => g.close());

const good = (extra: ReadonlyArray<[string, string]> = []): string =>
  form([
    ["grant_type", "client_credentials"],
    ["client_id", APP.id],
    ["client_secret", APP.secret],
    ...extra,
  ]);

// RFC 6749 §5.1: token responses and their errors are never cached.
const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" };
// RFC 6749 §5.2: an error is a JSON body, and it is not cached either.
const JSON_NO_STORE = { "content-type": /^application\/json/, ...NO_STORE };

t.test(
  "a token response carries the RFC 9068 JWT twice, Bearer, expires_in, no-store",
  async (t) => {
    const answer = await postToken(g.url, { body: good() });
    t.equal(answer.status, 200);
    t.match(answer.headers["content-type"], /^application\/json/);
    t.match(answer.headers, NO_STORE, "no-store");
    t.strictSame(Object.keys(answer.json).sort(), [
      "access_token",
      "expires_in",
      "token",
      "token_type",
    ]);
    t.equal(answer.json.token_type, "Bearer");
    t.equal(answer.json.expires_in, 900);
    t.equal(answer.json.token, answer.json.access_token, "token is the same JWT");
    t.notOk("refresh_token" in answer.json, "no refresh_token");
    const jwt = answer.json.access_token as string;
    const header = decodeProtectedHeader(jwt);
    t.equal(header.typ, "at+jwt");
    t.equal(header.alg, "EdDSA");
    t.match(header.kid, /^[A-Za-z0-9_-]{43}$/, "kid is a SHA-256 thumbprint");
    const claims = decodeJwt(jwt);
    t.equal(claims.iss, "gatehouse");
    t.equal(claims.aud, "upstream");
    t.equal(claims.sub, APP.id);
    t.equal(claims.client_id, APP.id);
    t.equal(claims.iat, NOW / 1000);
    t.equal(claims.exp, NOW / 1000 + 900);
    t.match(claims.jti, /^[0-9a-f-]{36}$/);
    const second = await postToken(g.url, { body: good() });
    t.not(
      decodeJwt(second.json.access_token as string).jti,
      claims.jti,
      "each token has its own jti",
    );
  },
);

t.test("other methods answer 405 with Allow: POST", async (t) => {
  for (const method of ["GET", "PUT", "DELETE", "HEAD"]) {
    const answer = await postToken(g.url, { method });
    t.equal(answer.status, 405, method);
    t.equal(answer.headers.allow, "POST", `${method} Allow`);
    t.match(answer.headers, NO_STORE, "no-store");
    if (method !== "HEAD") {
      t.equal(answer.json.error, "method_not_allowed", `${method} error`);
      t.type(answer.json.error_description, "string");
    }
  }
  t.equal(upstream.received.length, 0, "never forwarded");
});

t.test("a JSON body is read; a body without a known Content-Type is invalid_request", async (t) => {
  const json = await postToken(g.url, {
    headers: { "content-type": "application/json; charset=utf-8" },
    body: JSON.stringify({
      grant_type: "client_credentials",
      client_id: APP.id,
      client_secret: APP.secret,
    }),
  });
  t.equal(json.status, 200, "application/json accepted (docs/tokens.md)");
  const upper = await postToken(g.url, {
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ CLIENT_ID: APP.id, CLIENT_SECRET: APP.secret }),
  });
  t.equal(upper.status, 200, "CLIENT_ID / CLIENT_SECRET aliases");
  for (const contentType of ["text/plain", "multipart/form-data; boundary=x", ""]) {
    const answer = await postToken(g.url, {
      headers: { "content-type": contentType },
      body: good(),
    });
    t.equal(answer.status, 400, `Content-Type ${JSON.stringify(contentType)}`);
    t.equal(answer.json.error, "invalid_request");
    t.match(answer.headers, NO_STORE, "no-store");
  }
  // The empty header above is still a header line; this request has none at all.
  const untyped = good();
  const absent = await rawRequest(
    g.port,
    `POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(untyped)}\r\n` +
      `Connection: close\r\n\r\n${untyped}`,
  );
  t.equal(absent.status, 400, "no Content-Type line");
  t.match(absent.headers, JSON_NO_STORE, "no Content-Type line: JSON, no-store");
  t.match(JSON.parse(absent.body), { error: "invalid_request" });
  for (const body of ["[1,2]", "{not json", JSON.stringify({ client_id: 7, client_secret: "x" })]) {
    const answer = await postToken(g.url, {
      headers: { "content-type": "application/json" },
      body,
    });
    t.equal(answer.status, 400, body);
    t.equal(answer.json.error, "invalid_request");
  }
});

t.test(
  "a missing or empty grant_type is taken as client_credentials (docs/tokens.md)",
  async (t) => {
    const missing = await postToken(g.url, {
      body: form([
        ["client_id", APP.id],
        ["client_secret", APP.secret],
      ]),
    });
    t.equal(missing.status, 200);
    const empty = await postToken(g.url, {
      body: `grant_type=&${form([
        ["client_id", APP.id],
        ["client_secret", APP.secret],
      ])}`,
    });
    t.equal(empty.status, 200);
    const basicOnly = await postToken(g.url, {
      headers: { authorization: basic(APP.id, APP.secret) },
    });
    t.equal(basicOnly.status, 200, "Basic and an empty body");
  },
);

t.test("other grant types, and case variants, are unsupported_grant_type", async (t) => {
  for (const grant of [
    "password",
    "authorization_code",
    "refresh_token",
    "urn:ietf:params:oauth:grant-type:jwt-bearer",
    "Client_Credentials",
    "CLIENT_CREDENTIALS",
  ]) {
    const answer = await postToken(g.url, {
      body: form([
        ["grant_type", grant],
        ["client_id", APP.id],
        ["client_secret", APP.secret],
      ]),
    });
    t.equal(answer.status, 400, grant);
    t.equal(answer.json.error, "unsupported_grant_type", grant);
    t.match(answer.headers, NO_STORE, "no-store");
  }
});

t.test("a repeated parameter, an alias included, is invalid_request", async (t) => {
  for (const body of [
    `grant_type=client_credentials&${good()}`,
    `${good()}&client_id=${APP.id}`,
    `${good()}&CLIENT_ID=${APP.id}`,
    `${good()}&CLIENT_SECRET=x`,
  ]) {
    const answer = await postToken(g.url, { body });
    t.equal(answer.status, 400, body.replace(APP.secret, "***"));
    t.match(answer.headers, JSON_NO_STORE, "JSON, no-store");
    t.equal(answer.json.error, "invalid_request");
  }
});

t.test("an empty scope and unknown parameters are ignored; a scope not given is not", async (t) => {
  t.equal((await postToken(g.url, { body: good([["scope", ""]]) })).status, 200, "scope=");
  t.equal((await postToken(g.url, { body: good([["foo", "bar"]]) })).status, 200, "foo=bar");
  const scoped = await postToken(g.url, { body: good([["scope", "admin"]]) });
  t.equal(scoped.status, 400, "a scope the client was not given");
  t.equal(scoped.json.error, "invalid_scope");
});

const CHALLENGE = 'Basic realm="gatehouse"';

t.test("no client authentication is 401 invalid_client with a Basic challenge", async (t) => {
  for (const body of [
    "",
    "grant_type=client_credentials",
    `client_id=${APP.id}`,
    `client_secret=${APP.secret}`,
  ]) {
    const answer = await postToken(g.url, { body });
    t.equal(answer.status, 401, JSON.stringify(body.replace(APP.secret, "***")));
    t.equal(answer.headers["www-authenticate"], CHALLENGE);
    t.equal(answer.json.error, "invalid_client");
    t.match(answer.headers, NO_STORE, "no-store");
  }
});

t.test("wrong secret and unknown id answer byte for byte the same", async (t) => {
  const answers = [
    await postToken(g.url, { headers: { authorization: basic(APP.id, "wrong") } }),
    await postToken(g.url, { headers: { authorization: basic("nobody", "wrong") } }),
    await postToken(g.url, {
      body: form([
        ["client_id", APP.id],
        ["client_secret", "wrong"],
      ]),
    }),
    await postToken(g.url, {
      body: form([
        ["client_id", "nobody"],
        ["client_secret", "wrong"],
      ]),
    }),
    await postToken(g.url, {
      body: form([
        ["client_id", "REPORTING-APP"],
        ["client_secret", APP.secret],
      ]),
    }),
  ];
  const comparable = (answer: (typeof answers)[number]) => {
    const headers = { ...answer.headers };
    delete headers.date;
    delete headers["x-request-id"];
    return { status: answer.status, headers, body: answer.body.toString("utf8") };
  };
  const first = comparable(answers[0] as (typeof answers)[number]);
  t.equal(first.status, 401);
  t.equal(first.headers["www-authenticate"], CHALLENGE);
  t.match(JSON.parse(first.body), { error: "invalid_client" });
  for (const answer of answers.slice(1)) t.strictSame(comparable(answer), first);
});

t.test("Basic and a body secret at once is invalid_request", async (t) => {
  const both = await postToken(g.url, {
    headers: { authorization: basic(APP.id, APP.secret) },
    body: form([
      ["client_id", APP.id],
      ["client_secret", APP.secret],
    ]),
  });
  t.equal(both.status, 400);
  t.match(both.headers, JSON_NO_STORE, "JSON, no-store");
  t.equal(both.json.error, "invalid_request");
  const otherId = await postToken(g.url, {
    headers: { authorization: basic(APP.id, APP.secret) },
    body: form([["client_id", ODD.id]]),
  });
  t.equal(otherId.status, 400, "a body client_id naming another client");
  t.match(otherId.headers, JSON_NO_STORE, "another client: JSON, no-store");
  t.equal(otherId.json.error, "invalid_request");
  const sameId = await postToken(g.url, {
    headers: { authorization: basic(APP.id, APP.secret) },
    body: form([["client_id", APP.id]]),
  });
  t.equal(sameId.status, 200, "a body client_id repeating the Basic one is allowed");
});

t.test("credentials in the query string are invalid_request and never logged", async (t) => {
  const secret = "query-secret-must-not-be-logged";
  for (const query of [
    `client_secret=${secret}`,
    `client_id=${APP.id}`,
    `CLIENT_SECRET=${secret}`,
  ]) {
    const response = await postTokenAt(`/oauth/token?${query}`, good());
    t.equal(response.status, 400, query);
    t.match(response.headers, JSON_NO_STORE, `${query}: JSON, no-store`);
    t.match(JSON.parse(response.body), { error: "invalid_request" });
  }
  t.notOk(JSON.stringify(g.logs).includes(secret), "no log line holds the secret");
});

async function postTokenAt(target: string, body: string) {
  return rawRequest(
    g.port,
    `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

t.test("Basic credentials are form-urldecoded after base64 (RFC 6749 §2.3.1)", async (t) => {
  const encoded = await postToken(g.url, { headers: { authorization: basic(ODD.id, ODD.secret) } });
  t.equal(encoded.status, 200, "form-encoded id and secret");
  t.equal(decodeJwt(encoded.json.access_token as string).sub, ODD.id);
  const raw = Buffer.from(`${ODD.id}:${ODD.secret}`).toString("base64");
  const unencoded = await postToken(g.url, { headers: { authorization: `Basic ${raw}` } });
  t.equal(unencoded.status, 401, "the same secret sent without form-encoding is another secret");
  const colonInSecret = Buffer.from(`${ODD.id}:${formEncode(ODD.secret)}`).toString("base64");
  t.equal(
    (await postToken(g.url, { headers: { authorization: `basic ${colonInSecret}` } })).status,
    200,
    "scheme case-insensitive; split at the first colon",
  );
});

t.test("malformed Basic is 401 invalid_client with a Basic challenge, never 500", async (t) => {
  for (const value of [
    "Basic !!!not-base64!!!",
    `Basic ${Buffer.from("no-colon").toString("base64")}`,
    `Basic ${Buffer.from(":secret").toString("base64")}`,
    `Basic ${Buffer.from("id:").toString("base64")}`,
    `Basic ${Buffer.from("id:%zz").toString("base64")}`,
    `Basic ${Buffer.from([0x69, 0x64, 0x3a, 0xff]).toString("base64")}`,
    "Basic",
    "Bearer abc",
  ]) {
    const answer = await postToken(g.url, {
      headers: { authorization: value },
      body: good().slice(0, 0),
    });
    t.equal(answer.status, 401, value);
    t.equal(answer.headers["www-authenticate"], CHALLENGE, value);
    t.equal(answer.json.error, "invalid_client", value);
  }
});

t.test("two Authorization headers at the token endpoint are invalid_request", async (t) => {
  const auth = basic(APP.id, APP.secret);
  const answer = await rawRequest(
    g.port,
    `POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nAuthorization: ${auth}\r\n` +
      "Content-Length: 0\r\nConnection: close\r\n\r\n",
  );
  t.equal(answer.status, 400);
  t.match(JSON.parse(answer.body), { error: "invalid_request" });
});

t.test("bad percent-encoding and invalid UTF-8 in a form body are invalid_request", async (t) => {
  for (const body of [
    `${good()}&foo=%zz`,
    `grant_type=client_credentials&client_id=%C0%AF&client_secret=x`,
    `grant_type=client_credentials&client_id=%E2%82&client_secret=x`,
    Buffer.concat([Buffer.from(`${good()}&x=`), Buffer.from([0xc3, 0x28])]),
  ]) {
    const answer = await postToken(g.url, { body });
    t.equal(answer.status, 400, String(body).slice(-24));
    t.match(answer.headers, JSON_NO_STORE, "JSON, no-store");
    t.equal(answer.json.error, "invalid_request");
  }
});

t.test("a body over 8 KiB is 413 payload_too_large and the connection closes", async (t) => {
  const declared = await rawRequest(
    g.port,
    "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
      "Content-Length: 1000000000\r\n\r\n",
  );
  t.equal(declared.status, 413);
  t.equal(declared.headers.connection, "close");
  t.match(JSON.parse(declared.body), { error: "payload_too_large" });
  t.equal(declared.headers["cache-control"], "no-store");

  const big = `${good()}&pad=${"x".repeat(9000)}`;
  const chunked = await rawRequest(
    g.port,
    "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n" +
      `Transfer-Encoding: chunked\r\n\r\n${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`,
  );
  t.equal(chunked.status, 413, "a chunked body that passes the cap");
  t.equal(chunked.headers.connection, "close");
  const atCap = `${good()}&pad=`;
  const exact = await postToken(g.url, { body: atCap + "x".repeat(8192 - atCap.length) });
  t.equal(exact.status, 200, "exactly 8 KiB is read");
});

t.test("error descriptions never echo the client's input", async (t) => {
  const hostile = 'evil"\\id\u2028<script>';
  const answer = await postToken(g.url, {
    body: form([
      ["client_id", hostile],
      ["client_secret", "x"],
      ["grant_type", "password"],
    ]),
  });
  t.equal(answer.status, 400);
  t.match(answer.headers, JSON_NO_STORE, "JSON, no-store");
  t.equal(answer.json.error, "unsupported_grant_type");
  t.notOk(answer.body.toString("utf8").includes("evil"), "not in the body");
  const unknown = await postToken(g.url, {
    body: form([
      ["client_id", hostile],
      ["client_secret", "x"],
    ]),
  });
  t.equal(unknown.status, 401);
  t.match(unknown.headers, JSON_NO_STORE, "401: JSON, no-store");
  t.equal(unknown.json.error, "invalid_client");
  t.notOk(unknown.body.toString("utf8").includes("evil"));
  t.match(
    unknown.json.error_description,
    /^[\x20-\x21\x23-\x5B\x5D-\x7E]+$/,
    "RFC 6749 §5.2 characters",
  );
});

t.test("Expect: 100-continue is answered 100 only for a request that will be read", async (t) => {
  const badBasic = await rawRequest(
    g.port,
    "POST /oauth/token HTTP/1.1\r\nHost: x\r\nAuthorization: Basic !!!\r\nExpect: 100-continue\r\n" +
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 10\r\n\r\n",
  );
  t.equal(badBasic.status, 401, "bad Basic: the final answer at once");
  t.notMatch(badBasic.text, /100 Continue/);
  const tooBig = await rawRequest(
    g.port,
    "POST /oauth/token HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n" +
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\n",
  );
  t.equal(tooBig.status, 413);
  t.notMatch(tooBig.text, /100 Continue/);

  const body = good();
  const continued = await new Promise<string>((resolve, reject) => {
    import("node:net").then(({ connect }) => {
      const socket = connect(g.port, "127.0.0.1");
      let text = "";
      socket.on("data", (chunk: Buffer) => {
        text += chunk.toString("latin1");
        if (
          text.startsWith("HTTP/1.1 100") &&
          !text.includes("\r\n\r\nHTTP/1.1 2") &&
          text.endsWith("\r\n\r\n")
        ) {
          socket.write(body);
        }
        if (/HTTP\/1\.1 200[\s\S]*"token_type":"Bearer"/.test(text)) {
          socket.destroy();
          resolve(text);
        }
      });
      socket.on("error", reject);
      socket.write(
        "POST /oauth/token HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n" +
          `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
    }, reject);
  });
  t.match(
    continued,
    /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK/,
    "100 first, then the token",
  );
});

t.test("the JWKS publishes the current public key; other methods get 405", async (t) => {
  const response = await fetch(`${g.url}/.well-known/jwks.json`);
  t.equal(response.status, 200);
  t.match(response.headers.get("content-type"), /^application\/json/);
  const jwks = (await response.json()) as { keys: Array<Record<string, unknown>> };
  t.equal(jwks.keys.length, 1);
  const key = jwks.keys[0] as Record<string, unknown>;
  t.match(key, { kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig" });
  t.notOk("d" in key, "no private part");
  const token = await postToken(g.url, { body: good() });
  t.equal(key.kid, decodeProtectedHeader(token.json.access_token as string).kid);
  const post = await fetch(`${g.url}/.well-known/jwks.json`, { method: "POST" });
  t.equal(post.status, 405);
  t.equal(post.headers.get("allow"), "GET, HEAD");
  t.match(await post.json(), { error: "method_not_allowed" });
});

t.test("metrics count tokens issued and failures by reason", async (t) => {
  const text = await scrape(g);
  t.match(text, /^gatehouse_tokens_issued_total [1-9]\d*$/m);
  t.match(text, /^gatehouse_auth_failures_total\{reason="wrong_secret"\} [1-9]\d*$/m);
  t.match(text, /^gatehouse_auth_failures_total\{reason="unknown_client"\} [1-9]\d*$/m);
  t.notOk(text.includes(APP.secret), "no secret in the metrics");
});
