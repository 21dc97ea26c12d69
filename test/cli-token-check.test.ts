/**
 * `gatehouse token check`, run as the built command: what gatehouse would decide for a bearer
 * token, and why. Own tokens come from a gatehouse started with the same file, or are signed as
 * gatehouse signs them (src/tokens/issue.ts) with the key the file names; a provider's tokens come
 * from a real provider in this process (oidc-provider, its keys found by discovery on port 0). A
 * revocation is read from the state file the stopped gatehouse saved.
 */
import { createPublicKey } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { loadSnapshot } from "../src/config/snapshot.js";
import { issueToken } from "../src/tokens/issue.js";
import { generateKeyPem } from "../src/tokens/keys.js";
import { revokeWithSecret } from "./helpers/assertions.js";
import { runCli, startCli, type CliResult } from "./helpers/cli.js";
import { startProvider, type ProviderClient } from "./helpers/provider.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const ISSUER = "https://auth.example.com";
const RESOURCE = "https://api.example.com";
const APP: TestClient = {
  id: "reporting-app",
  secret: "b7e2c9d4a1f6e3b8c5d2a9f4e1b6c3d8",
  extra: ["plan: standard", "scopes: [items:read, reports:read]"],
};
const BILLING: ProviderClient = {
  id: "billing",
  secret: "billing-secret",
  scope: "items:read items:write",
};
// A client of the provider's that the file does not list; the issuer has no plan for it.
const STRANGER: ProviderClient = { id: "stranger", secret: "stranger-secret", scope: "items:read" };

/** Runs `gatehouse token check ...args` with `input` on stdin, to its end. */
function tokenCheck(args: readonly string[], input = ""): Promise<CliResult> {
  return runCli([...args], { GATEHOUSE_CONFIG: "" }, input);
}

/** The value of the line labelled `label` (the label, then spaces, then the value). */
function field(stdout: string, label: string): string | undefined {
  const found = stdout.split("\n").find((text) => text.startsWith(`${label} `));
  return found?.slice(label.length).trim();
}

/** Every value of the lines labelled `label`. */
function fields(stdout: string, label: string): string[] {
  return stdout
    .split("\n")
    .filter((text) => text.startsWith(`${label} `))
    .map((text) => text.slice(label.length).trim());
}

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const provider = await startProvider({
  resource: RESOURCE,
  clients: [BILLING, STRANGER],
  scopes: ["items:read", "items:write"],
  oidcOnly: true,
});
t.teardown(() => provider.close());
const dir = await mkdtemp(join(tmpdir(), "gatehouse-token-check-"));
t.teardown(() => rm(dir, { recursive: true, force: true }));
await writeFile(join(dir, "signing.pem"), await generateKeyPem("EdDSA"));

const ROUTES = `routes:
  - path: /v1/items
    methods: [GET]
    scopes: [items:read]
  - path: /v1/items/*
    methods: [PUT, DELETE]
    scopes: [items:write]
  - path: /v1/reports/**
    methods: [GET]
    scopes_any: [reports:read, reports:all]
  - path: /status
    methods: [GET]
    auth: none
`;

// A config in `dir`: gatehouse's own tokens (signed with signing.pem unless `signing` says
// otherwise), the provider trusted as corp, its billing client listed with a scope cap.
async function configFile(
  name: string,
  clients: string,
  { signing = "key_file: signing.pem", limits = "limits:\n  state_file: state.json\n" } = {},
) {
  const path = join(dir, name);
  await writeFile(
    path,
    `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstream.url}
tokens:
  issuer: ${ISSUER}
  audience: ${RESOURCE}
  scopes: [items:read, items:write, reports:read, reports:all]
  signing:
    algorithm: EdDSA
    ${signing}
  trusted_issuers:
    - name: corp
      issuer: ${provider.issuer}
${clients}  - id: billing
    issuer: corp
    plan: premium
    scopes: [items:read]
plans:
  standard:
    rate_limit: { limit: 100, window: 1m }
    quota: { limit: 5000, period: day }
  premium:
    rate_limit: { limit: 1000, window: 1h }
${limits}${ROUTES}`,
  );
  return path;
}

const config = await configFile("gatehouse.yaml", await clientsYaml([APP]));
const gatehouse = await startCli(["--config", config]);
t.teardown(() => gatehouse.stop("SIGTERM"));
const issued = await obtainToken(gatehouse.url, APP);
const signature = issued.split(".")[2] as string;

// Tokens signed as gatehouse signs them, with the file's key, at another time or for another
// audience; and with another key (the one a config without key_file generates).
const snapshot = await loadSnapshot(config, { env: {} });
const own = (nowMs: number, audience = RESOURCE) =>
  issueToken(snapshot.tokens, APP.id, nowMs, { scope: "items:read", audience }).then(
    (made) => made.token,
  );
const ephemeral = await configFile("ephemeral.yaml", await clientsYaml([APP]), {
  signing: "# no key: one is generated at start",
});
const otherKey = await loadSnapshot(ephemeral, { env: {} });

t.test(
  "a token of the running gatehouse: accepted, with its client, plan, scopes and routes",
  async (t) => {
    const result = await tokenCheck(["token", "check", "--config", config], `Bearer ${issued}\n`);
    t.equal(result.status, 0, result.stderr);
    t.equal(result.stderr, "");
    const out = result.stdout;
    t.equal(field(out, "config"), config);
    t.match(field(out, "header"), /^alg EdDSA, typ at\+jwt, kid [\w-]{43}$/);
    t.equal(field(out, "iss"), ISSUER);
    t.equal(field(out, "sub"), APP.id);
    t.equal(field(out, "aud"), RESOURCE);
    t.equal(field(out, "client_id"), APP.id);
    t.equal(field(out, "scope"), "items:read reports:read");
    t.match(field(out, "iat"), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z \((now|\d+ s ago)\)$/);
    t.match(field(out, "exp"), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z \(in (60|59) min\)$/);
    t.match(field(out, "jti"), /^[0-9a-f-]{36}$/);
    t.equal(field(out, "cnf"), "absent");
    t.equal(
      field(out, "issuer"),
      `gatehouse's own (tokens.issuer ${ISSUER}); aud must hold ${RESOURCE}; alg EdDSA`,
    );
    t.match(field(out, "key"), /^kid [\w-]{43} is the key of tokens\.signing\.key_file$/);
    t.equal(field(out, "verdict"), "accepted");
    t.equal(
      field(out, "client"),
      `${APP.id} (issuer own; listed in clients; gatehouse limits show ${APP.id})`,
    );
    // Nothing was revoked: the state file, when the running gatehouse has written one, says so.
    t.match(
      field(out, "revocation"),
      /^(not checked \(held by the running gatehouse; the state file .*state\.json is not there\)|not revoked as of the state file .*state\.json, .*)$/,
    );
    t.equal(field(out, "plan"), "standard: 100 per 1m, quota 5000 per day");
    t.equal(field(out, "scopes"), "items:read reports:read");
    t.strictSame(fields(out, "may call"), ["GET /v1/items", "GET /v1/reports/**"]);
    t.strictSame(fields(out, "may not call"), ["PUT,DELETE /v1/items/*: needs items:write"]);
    t.notMatch(out, /\/status/, "a route without auth is no bearer route");
    t.notOk(out.includes(signature), "the signature is never printed");
    t.notOk(out.includes(issued.split(".")[1] as string), "nor the token");

    const given = await tokenCheck(["token", "check", "-c", config, "--token", issued]);
    t.equal(given.status, 0, "--token instead of stdin");
    t.equal(
      given.stdout.replace(/\(.* ago\)|\(now\)/g, ""),
      out.replace(/\(.* ago\)|\(now\)/g, ""),
      "the same facts",
    );
  },
);

t.test("--json prints the same facts as one object", async (t) => {
  const result = await tokenCheck(["token", "check", "--config", config, "--json"], issued);
  t.equal(result.status, 0);
  const report = JSON.parse(result.stdout) as Record<string, unknown>;
  t.match(report, {
    config,
    verdict: { outcome: "accepted" },
    notJwt: null,
    header: { alg: "EdDSA", typ: "at+jwt" },
    claims: { iss: ISSUER, client_id: APP.id, cnf: false, exp: { relative: /^in (60|59) min$/ } },
    issuer: { name: "own", audiences: [RESOURCE], algorithms: ["EdDSA"] },
    key: { found: true },
    client: { id: APP.id, issuer: "own", key: APP.id, listed: true },
    plan: { name: "standard", limits: ["100 per 1m", "quota 5000 per day"], dryRun: false },
    scopes: ["items:read", "reports:read"],
  });
  const claims = report.claims as { exp: { epoch: number; iso: string } };
  t.equal(claims.exp.iso, new Date(claims.exp.epoch * 1000).toISOString());
  t.strictSame(report.routes, [
    {
      methods: ["GET"],
      path: "/v1/items",
      allowed: true,
      needs: { every: true, scopes: ["items:read"] },
      missing: [],
      needsBinding: false,
    },
    {
      methods: ["PUT", "DELETE"],
      path: "/v1/items/*",
      allowed: false,
      needs: { every: true, scopes: ["items:write"] },
      missing: ["items:write"],
      needsBinding: false,
    },
    {
      methods: ["GET"],
      path: "/v1/reports/**",
      allowed: true,
      needs: { every: false, scopes: ["reports:read", "reports:all"] },
      missing: [],
      needsBinding: false,
    },
  ]);
  t.notOk(result.stdout.includes(signature));
});

// The verifier's reasons and messages, as the authenticate stage logs them.
t.test("refused tokens: exit 1, the reason, the message and the answer", async (t) => {
  // The signature's first character changed: still base64url, no longer the signature.
  const tampered = `${issued.slice(0, -signature.length)}${signature[0] === "A" ? "B" : "A"}${signature.slice(1)}`;
  const cases: ReadonlyArray<readonly [string, string, string, RegExp]> = [
    [
      "expired",
      await own(Date.now() - 2 * 3600_000),
      "bearer_expired",
      /^the token has expired: "exp" claim timestamp check failed$/,
    ],
    [
      "for another audience",
      await own(Date.now(), "https://other.example.com"),
      "bearer_audience",
      /^the token is not meant for this resource \(aud\): unexpected "aud" claim value$/,
    ],
    [
      "signed by another key",
      (
        await issueToken(otherKey.tokens, APP.id, Date.now(), {
          scope: undefined,
          audience: RESOURCE,
        })
      ).token,
      "bearer_unknown_kid",
      /^no key of the token's issuer has its kid: no key has this token's kid$/,
    ],
    ["tampered with", tampered, "bearer_signature", /: signature verification failed$/],
    [
      "opaque",
      "d3b07384d113edec49eaa6238ad5ff00",
      "bearer_not_a_jwt",
      /^gatehouse verifies JWT access tokens only, .+: the token is not a compact JWS$/,
    ],
  ];
  const seen = new Map<string, string>();
  for (const [what, token, reason, message] of cases) {
    const result = await tokenCheck(["token", "check", "--config", config], token);
    t.equal(result.status, 1, what);
    const verdict = field(result.stdout, "verdict") ?? "";
    t.ok(verdict.startsWith(`refused (${reason}): `), `${what}: ${verdict}`);
    t.match(verdict.slice(`refused (${reason}): `.length), message, what);
    t.equal(field(result.stdout, "answer"), "401 invalid_token", what);
    t.equal(field(result.stdout, "client"), undefined, `${what}: no client`);
    t.equal(field(result.stdout, "plan"), undefined, `${what}: no plan`);
    t.equal(fields(result.stdout, "may call").length, 0, `${what}: no routes`);
    seen.set(what, result.stdout);
  }
  const expired = seen.get("expired") as string;
  t.match(field(expired, "exp"), /^\S+Z \((60|61) min ago\)$/, "exp, and how long ago");
  t.match(
    field(seen.get("signed by another key") as string, "key"),
    /^no key with kid [\w-]{43}: the keys are tokens\.signing\.key_file's$/,
  );
  const opaque = seen.get("opaque") as string;
  t.match(field(opaque, "token"), /^not a JWT \(.+\); gatehouse verifies JWT access tokens only$/);
  t.equal(field(opaque, "header"), undefined);
  t.equal(field(opaque, "issuer"), "unknown: the token's claims cannot be read");
  const spaced = await tokenCheck(
    ["token", "check", "--config", config],
    `Bearer ${issued.replace(".", ". ")}`,
  );
  t.equal(
    field(spaced.stdout, "verdict"),
    "refused (bearer_malformed): the request's bearer credentials are malformed: the bearer token has characters a token cannot have",
  );
  t.equal(field(spaced.stdout, "answer"), "400 invalid_request");
});

t.test("claims are printed with control characters escaped", async (t) => {
  const id = "evil\u001b[2J\u0007";
  const token = (
    await issueToken(snapshot.tokens, id, Date.now(), { scope: undefined, audience: RESOURCE })
  ).token;
  const result = await tokenCheck(["token", "check", "--config", config], token);
  t.equal(result.status, 1);
  const controls = [...result.stdout].filter((c) => c < " " && c !== "\n");
  t.strictSame(controls, [], "nothing a terminal would act on");
  t.equal(field(result.stdout, "sub"), "evil\\u001b[2J\\u0007");
  // Signed with the file's key, but for a client the file does not list.
  t.equal(
    field(result.stdout, "verdict"),
    "refused (bearer_client_unknown): the token's client is not one gatehouse lists: the token's client is no longer in the configuration",
  );
});

t.test("a trusted provider's token: accepted, its issuer named, its scopes capped", async (t) => {
  const token = await provider.token(BILLING);
  const result = await tokenCheck(["token", "check", "--config", config], token);
  t.equal(result.status, 0, "accepted");
  const out = result.stdout;
  t.equal(field(out, "iss"), provider.issuer);
  t.equal(field(out, "client_id"), BILLING.id);
  t.equal(field(out, "scope"), "items:read items:write");
  t.equal(
    field(out, "issuer"),
    `trusted issuer corp (${provider.issuer}); aud must hold ${RESOURCE}; alg RS256, PS256, ES256, EdDSA`,
  );
  t.equal(
    field(out, "key"),
    `kid ${provider.key.kid} is in corp's JWKS (discovered from ${provider.issuer})`,
  );
  t.equal(field(out, "verdict"), "accepted");
  t.equal(
    field(out, "client"),
    `${BILLING.id} (issuer corp; listed in clients; gatehouse limits show corp:${BILLING.id})`,
  );
  t.equal(field(out, "revocation"), undefined, "revocation is the provider's");
  t.equal(field(out, "plan"), "premium: 1000 per 1h");
  // The provider granted items:write too; the client's entry caps it.
  t.equal(field(out, "scopes"), "items:read");
  t.strictSame(fields(out, "may call"), ["GET /v1/items"]);
  t.strictSame(fields(out, "may not call"), [
    "PUT,DELETE /v1/items/*: needs items:write",
    "GET /v1/reports/**: needs one of reports:read reports:all",
  ]);

  const unlisted = await tokenCheck(
    ["token", "check", "--config", config],
    await provider.token(STRANGER),
  );
  t.equal(unlisted.status, 1);
  t.equal(
    field(unlisted.stdout, "verdict"),
    "refused (bearer_client_unknown): the token's client is not one gatehouse lists: the issuer's client is not listed",
  );
});

t.test("a provider whose keys cannot be fetched: 503, and the fetch failure named", async (t) => {
  const token = await provider.token(BILLING);
  provider.stop();
  t.teardown(() => provider.resume());
  const result = await tokenCheck(["token", "check", "--config", config], token);
  t.equal(result.status, 1);
  t.match(
    field(result.stdout, "key"),
    /^the keys of corp cannot be fetched \(network: http:\/\/127\.0\.0\.1:\d+\/\.well-known\/oauth-authorization-server: fetch failed\); a running gatehouse keeps the keys it fetched last, and answers 503 for a kid it does not have$/,
  );
  t.equal(
    field(result.stdout, "verdict"),
    "refused (bearer_keys_unavailable): the keys of the token's issuer cannot be fetched: the keys of corp hold no key for the token's kid yet",
  );
  t.equal(field(result.stdout, "answer"), "503 temporarily_unavailable");
});

t.test("a revoked token, read from the state file once gatehouse has stopped", async (t) => {
  const revoked = await obtainToken(gatehouse.url, APP);
  t.equal((await revokeWithSecret(gatehouse.url, APP, revoked)).status, 200);
  // A graceful stop saves the revocations to the state file.
  t.equal(await gatehouse.stop("SIGTERM"), 0);
  const result = await tokenCheck(["token", "check", "--config", config], revoked);
  t.equal(result.status, 1);
  t.match(
    field(result.stdout, "revocation"),
    /^revoked: its jti is in the state file .*state\.json$/,
  );
  t.equal(field(result.stdout, "verdict"), "refused (bearer_revoked): the token has been revoked");
  const kept = await tokenCheck(["token", "check", "--config", config], issued);
  t.equal(kept.status, 0);
  t.match(
    field(kept.stdout, "revocation"),
    /^not revoked as of the state file .*state\.json, which a running gatehouse writes soon after each revocation$/,
  );
});

t.test("without state_file, revocation is said to be unchecked", async (t) => {
  const path = await configFile("no-state.yaml", await clientsYaml([APP]), { limits: "" });
  const result = await tokenCheck(["token", "check", "--config", path], issued);
  t.equal(result.status, 0);
  t.equal(field(result.stdout, "revocation"), "not checked (held by the running gatehouse)");
});

t.test("after a rotation, a token of the old key is checked with previous_keys", async (t) => {
  await writeFile(join(dir, "next.pem"), await generateKeyPem("EdDSA"));
  const old = createPublicKey(await readFile(join(dir, "signing.pem"), "utf8"));
  await writeFile(join(dir, "old.pub.pem"), old.export({ type: "spki", format: "pem" }) as string);
  const rotated = await configFile("rotated.yaml", await clientsYaml([APP]), {
    signing: "key_file: next.pem\n  previous_keys: [old.pub.pem]",
  });
  const result = await tokenCheck(["token", "check", "--config", rotated], issued);
  t.equal(result.status, 0);
  t.match(field(result.stdout, "key"), /^kid [\w-]{43} is one of tokens\.previous_keys$/);
  t.equal(field(result.stdout, "verdict"), "accepted");
});

t.test("a client the file no longer lists, and a file without a signing key", async (t) => {
  const removed = await configFile(
    "removed.yaml",
    await clientsYaml([{ id: "other-app", secret: APP.secret }]),
  );
  const gone = await tokenCheck(["token", "check", "--config", removed], issued);
  t.equal(gone.status, 1);
  t.equal(
    field(gone.stdout, "verdict"),
    "refused (bearer_client_unknown): the token's client is not one gatehouse lists: the token's client is no longer in the configuration",
  );

  const unchecked = await tokenCheck(["token", "check", "--config", ephemeral], issued);
  t.equal(unchecked.status, 1);
  t.equal(
    field(unchecked.stdout, "key"),
    "tokens.signing names no key: a running gatehouse signs with a key it generated at start, which only that process has; its tokens cannot be checked offline",
  );
  t.equal(
    field(unchecked.stdout, "verdict"),
    "not checked: gatehouse's own tokens cannot be checked offline without tokens.signing.key_file",
  );
  t.equal(field(unchecked.stdout, "answer"), undefined);
});

t.test("a file with problems: they are printed, exit 1", async (t) => {
  const broken = join(dir, "broken.yaml");
  await writeFile(broken, `upstream:\n  url: ${upstream.url}\n  timout: 1s\n`);
  const result = await tokenCheck(["token", "check", "--config", broken], issued);
  t.equal(result.status, 1);
  t.equal(result.stdout, "");
  t.match(
    result.stderr,
    /^.*broken\.yaml:3:3 upstream\.timout: unknown key; did you mean "timeout"\?/,
  );
});

t.test("usage errors exit 2", async (t) => {
  for (const [args, input, message] of [
    [
      ["token"],
      issued,
      /^gatehouse: token takes check, then the token on stdin or in --token TOKEN\nusage: gatehouse token check/,
    ],
    [["token", "show"], issued, /^gatehouse: token takes check/],
    [
      ["token", "check", "--config", config],
      "",
      /^gatehouse: no token: give it on stdin or in --token TOKEN\n/,
    ],
    [["token", "check", "--config", config], " Bearer \n", /^gatehouse: no token/],
    [
      ["token", "check", "--config", config],
      "x".repeat(70_000),
      /^gatehouse: stdin holds over 65536 bytes; give it one token\n/,
    ],
    [["token", "check", "--config", config, "--token"], "", /^gatehouse: --token needs a value\n/],
    [["token", "check", "extra"], issued, /^gatehouse: unexpected argument "extra"/],
    [
      ["token", "check", "--no-env"],
      issued,
      /^gatehouse: --no-env is an option of check, not of token\n/,
    ],
    [["keygen", "--token", "x"], "", /^gatehouse: --token is an option of token, not of keygen\n/],
  ] as const) {
    const result = await tokenCheck([...args], input);
    t.equal(result.status, 2, args.join(" "));
    t.match(result.stderr, message, args.join(" "));
    t.equal(result.stdout, "", args.join(" "));
  }
});
