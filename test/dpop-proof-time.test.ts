/**
 * The edges of a used proof's life (docs/dpop.md), through real sockets on a clock the test holds:
 * a proof is refused as used through the last millisecond at which it verifies, whether its iat
 * lies behind now or ahead, in the process and in Redis; an `iat` (or an assertion's `exp`) with
 * a fraction of a second is held in whole milliseconds, so Redis records it as it records any
 * other; and with the memory store, used proof ids are kept in `state_file` across a restart.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import t from "tap";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";
import {
  assertion,
  assertionRequest,
  jwksFiles,
  keyClient,
  keyClientsYaml,
} from "./helpers/assertions.js";
import { json, type ClientResponse } from "./helpers/client.js";
import { dpopKey, dpopTokenRequest, proof } from "./helpers/dpop.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { connected } from "./helpers/redis-gatehouse.js";
import { startTestRedis } from "./helpers/redis.js";
import { claimsOf, clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "reporting-secret-0123456789abcdef" };
const ISSUER = "https://auth.example.com";
const TOKEN_URL = `${ISSUER}/oauth/token`;
// The window behind an iat, in milliseconds: 300 s, which the clock tolerance does not widen.
const WINDOW_MS = 300_000;
const START = Date.UTC(2026, 5, 1, 12);
const KEY = await dpopKey();
const batch = await keyClient("batch-job", "ES256");

const upstream = await startUpstream();
t.teardown(() => upstream.close());

let now = START;

/** A config with APP and `batch`, gatehouse's issuer ISSUER, and `more` YAML. */
async function yaml(more = ""): Promise<string> {
  return configFor(
    upstream.url,
    `tokens:
  issuer: ${ISSUER}
  failure_limit: { limit: 1000, window: 1m }
${await clientsYaml([APP])}${keyClientsYaml([batch])}${more}`,
  );
}

async function gatehouse(more = ""): Promise<TestGatehouse> {
  const g = await startTestGatehouse(await yaml(more), {
    now: () => now,
    files: jwksFiles([batch]),
  });
  t.teardown(() => g.close());
  return g;
}

/** A token request of APP to `g` with the DPoP header `dpop`. */
const tokenRequest = (g: TestGatehouse, dpop: string) => dpopTokenRequest(g.url, APP, dpop);

/** A proof by KEY for the token endpoint, issued at `iat` (seconds, fractions kept). */
const tokenProof = (iat: number) => proof(KEY, { htm: "POST", htu: TOKEN_URL, iat });

/** What an answer says: its status and, when refused, its error_description. */
const said = (answer: ClientResponse) => {
  const body = json(answer);
  return answer.status === 200 ? 200 : `${answer.status} ${String(body.error_description)}`;
};

t.test("a used proof is refused through the last millisecond of its window", async (t) => {
  const g = await gatehouse();
  // A proof whose iat lies ahead is accepted from a window before it: held for both windows.
  for (const iat of [START / 1000, START / 1000 + 0.1234567, START / 1000 + 299]) {
    now = START;
    const dpop = await tokenProof(iat);
    t.equal(said(await tokenRequest(g, dpop)), 200, `iat ${iat}: first use`);
    // The last millisecond at which the proof verifies: iat in whole milliseconds and the window.
    const last = Math.floor(iat * 1000) + WINDOW_MS;
    now = last;
    t.equal(said(await tokenRequest(g, dpop)), `400 ${PROOF_RULES.replay}`, `iat ${iat}: last ms`);
    now = last + 1;
    t.equal(said(await tokenRequest(g, dpop)), `400 ${PROOF_RULES.iat}`, `iat ${iat}: past it`);
  }
});

t.test("a fraction of a second in iat or exp is recorded in Redis like any other", async (t) => {
  const redis = await startTestRedis();
  t.teardown(() => redis.close());
  const prefix = `gatehouse-fractions-${randomBytes(6).toString("hex")}:`;
  // Closed: a failed record is a 503, never a proof or an assertion let through twice.
  const store = `limits:
  store: redis
  redis:
    url: ${redis.url}
    key_prefix: "${prefix}"
    timeout: 10s
    on_outage: closed
`;
  now = START;
  const [a, b] = [await gatehouse(store), await gatehouse(store)];
  t.ok((await connected(a)) && (await connected(b)), "Redis answers");

  const dpop = await tokenProof(START / 1000 + 0.1234567);
  t.equal(said(await tokenRequest(a, dpop)), 200, "a proof issued at a fraction of a second");
  t.equal(said(await tokenRequest(b, dpop)), `400 ${PROOF_RULES.replay}`, "used, at every replica");

  // A proof issued 299 s ahead is accepted from now to a window after its iat: its record in
  // Redis lives that long, as gatehouse's clock reads it.
  const ahead = await tokenProof(START / 1000 + 299);
  t.equal(said(await tokenRequest(a, ahead)), 200, "a proof issued 299 s ahead");
  const direct = new Redis(redis.url);
  t.teardown(() => direct.quit());
  const kept = 299_000 + WINDOW_MS + 1;
  const left = await direct.pttl(`${prefix}{dpop:${KEY.jkt}}:once:${String(claimsOf(ahead).jti)}`);
  t.ok(left <= kept && left > kept - 30_000, `${left} ms left of ${kept}`);
  now = START + kept - 1;
  t.equal(said(await tokenRequest(b, ahead)), `400 ${PROOF_RULES.replay}`, "used, to its end");
  now = START;

  const exp = Math.floor(START / 1000) + 60.5;
  const signed = await assertion(batch, START, ISSUER, { exp });
  const first = await assertionRequest(a.url, signed);
  t.equal(first.status, 200, "an assertion expiring at a fraction of a second");
  const replayed = await assertionRequest(b.url, signed);
  t.equal(replayed.status, 401, "used, at every replica");
  t.match(replayed.json.error_description, /was used before/);
});

t.test("with the memory store, used proofs are kept in state_file across a restart", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-proof-state-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const stateFile = join(dir, "state.json");
  const withState = `limits:\n  state_file: ${stateFile}\n`;
  now = START;
  const dpop = await tokenProof(START / 1000);

  const first = await startTestGatehouse(await yaml(withState), {
    now: () => now,
    files: jwksFiles([batch]),
  });
  t.equal(said(await tokenRequest(first, dpop)), 200, "the proof's first use");
  await first.close();
  const saved = JSON.parse(await readFile(stateFile, "utf8")) as {
    marks: { proofs: Array<{ client: string; id: string; endsAt: number }> };
  };
  t.strictSame(
    saved.marks.proofs,
    [
      {
        client: APP.id,
        id: `${KEY.jkt} ${String(claimsOf(dpop).jti)}`,
        endsAt: START + WINDOW_MS + 1,
      },
    ],
    "held for its client, with its key, through its last millisecond",
  );

  now = START + 60_000;
  const second = await gatehouse(withState);
  t.equal(
    said(await tokenRequest(second, dpop)),
    `400 ${PROOF_RULES.replay}`,
    "still used after the restart",
  );
  t.equal(
    said(await tokenRequest(second, await tokenProof(now / 1000))),
    200,
    "a new proof passes",
  );
});

t.test("a state file written before proofs were saved still loads", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "gatehouse-proof-state-"));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const stateFile = join(dir, "state.json");
  now = START;
  const endsAt = START + 3_600_000;
  const revoked = [{ client: APP.id, id: "a-revoked-token", endsAt }];
  await writeFile(
    stateFile,
    JSON.stringify({ version: 2, savedAt: START, counters: [], marks: { used: [], revoked } }),
  );
  const g = await gatehouse(`limits:\n  state_file: ${stateFile}\n`);
  const restored = await g.logged((line) => /restored from the state file/.test(String(line.msg)));
  t.match(restored, { revoked: 1, usedAssertions: 0, usedProofs: 0 });
  t.equal(said(await tokenRequest(g, await tokenProof(START / 1000))), 200);
});
