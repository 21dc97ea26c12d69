/**
 * Which reloads keep the verified tokens and the remembered secrets: the configurations are read
 * from files as a reload reads them, and their trust digests compared. A change to a key (a key
 * file's content too), the own issuer and the claims it checks, a trusted issuer or a client (its
 * secret, one from the environment too, and its JWKS file) is a new digest, and the caches start
 * empty; a change to the routes, the limits or how failures are limited is not.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { loadSnapshot } from "../src/config/snapshot.js";
import { createEphemeralKeys, generateKeyPem } from "../src/tokens/keys.js";
import { createPlainSecrets, hashSecret } from "../src/tokens/secrets.js";
import { keyClient } from "./helpers/assertions.js";

const dir = await mkdtemp(join(tmpdir(), "gatehouse-trust-"));
t.teardown(() => rm(dir, { recursive: true, force: true }));

const [keyA, keyB, keyC] = await Promise.all([1, 2, 3].map(() => generateKeyPem("EdDSA")));
const [jwksA, jwksB] = (
  await Promise.all([keyClient("signer", "ES256"), keyClient("signer", "ES256")])
).map((client) => client.jwks);
const HASH = await hashSecret("reporting-secret-0123456789abcdef");
const OTHER_HASH = await hashSecret("another-secret-0123456789abcdef");

/** The parts of a configuration a case changes; the rest is the same in every one. */
interface Parts {
  readonly tokens?: string;
  readonly client?: string;
  readonly clients?: string;
  readonly routes?: string;
  readonly files?: Readonly<Record<string, string>>;
  readonly env?: Readonly<Record<string, string>>;
}

const BASE = {
  tokens: "  signing: { algorithm: EdDSA, key_file: ./signing.pem }\n",
  client: `    secret_hash: "${HASH}"\n`,
  clients: `  - id: signer\n    jwks_file: ./signer.jwks.json\n  - id: env-app\n    secret_env: ENV_APP_SECRET\n`,
  routes: "  - path: /v1/items\n    methods: [GET]\n",
  files: { "signing.pem": keyA, "previous.pem": keyC, "signer.jwks.json": jwksA },
  env: { ENV_APP_SECRET: "env-app-secret-0123456789abcdef" },
} as const;

// One process's ephemeral keys and derived secrets, as a running gatehouse has across reloads.
const ephemeralKeys = createEphemeralKeys();
const plainSecrets = createPlainSecrets();
let written = 0;

/** The trust digest of the configuration `parts` make, read from files as a reload does. */
async function trustOf(parts: Parts): Promise<string> {
  const p = { ...BASE, ...parts, files: { ...BASE.files, ...parts.files } };
  for (const [name, content] of Object.entries(p.files)) await writeFile(join(dir, name), content);
  const path = join(dir, `config-${written++}.yaml`);
  await writeFile(
    path,
    `upstream:\n  url: http://127.0.0.1:1\ntokens:\n${p.tokens}clients:\n  - id: reporting-app\n${p.client}${p.clients}routes:\n${p.routes}`,
  );
  const snapshot = await loadSnapshot(path, { env: p.env, ephemeralKeys, plainSecrets });
  return snapshot.tokens.trust;
}

const base = await trustOf({});

t.test("reloads that keep keys, issuers and clients keep the caches", async (t) => {
  const kept: ReadonlyArray<readonly [string, Parts]> = [
    ["the same files read again", {}],
    ["a route added", { routes: `${BASE.routes}  - path: /v1/orders\n    methods: [GET]\n` }],
    ["the failure limit", { tokens: `${BASE.tokens}  failure_limit: { limit: 3, window: 5m }\n` }],
    ["the verification bound", { tokens: `${BASE.tokens}  verify_concurrency: 2\n` }],
    ["the token endpoint's path", { tokens: `${BASE.tokens}  path: /token\n` }],
    [
      "a client's plan and limits",
      { client: `${BASE.client}    rate_limit: { limit: 5, window: 1s }\n` },
    ],
  ];
  for (const [change, parts] of kept) t.equal(await trustOf(parts), base, change);
});

t.test("reloads that change a key, an issuer or a client start the caches empty", async (t) => {
  const previous = `${BASE.tokens}  previous_keys: [./previous.pem]\n`;
  const provider = `${BASE.tokens}  trusted_issuers:\n    - name: corp\n      issuer: https://idp.example\n      jwks_uri: https://idp.example/jwks\n`;
  const changed: ReadonlyArray<readonly [string, Parts]> = [
    ["the signing key file's content", { files: { "signing.pem": keyB } }],
    ["a previous key added", { tokens: previous }],
    ["the own issuer", { tokens: `${BASE.tokens}  issuer: https://gatehouse.example\n` }],
    ["the audience", { tokens: `${BASE.tokens}  audience: https://api.example\n` }],
    ["the tokens' lifetime", { tokens: `${BASE.tokens}  ttl: 10m\n` }],
    ["the clock tolerance", { tokens: `${BASE.tokens}  clock_tolerance: 5s\n` }],
    ["a trusted issuer added", { tokens: provider }],
    ["a client's secret_hash", { client: `    secret_hash: "${OTHER_HASH}"\n` }],
    [
      "a client's scopes",
      { tokens: `${BASE.tokens}  scopes: [a]\n`, client: `${BASE.client}    scopes: [a]\n` },
    ],
    ["a client added", { clients: `${BASE.clients}  - id: new-app\n    secret_hash: "${HASH}"\n` }],
    ["a client's JWKS file's content", { files: { "signer.jwks.json": jwksB } }],
    [
      "a secret_env variable's value",
      { env: { ENV_APP_SECRET: "env-app-secret-changed-0123456789" } },
    ],
  ];
  for (const [change, parts] of changed) t.not(await trustOf(parts), base, change);
});
