import t from "tap";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { calculateJwkThumbprint, decodeJwt, EmbeddedJWK, jwtVerify } from "jose";
import {
  accessTokenHash,
  createProver,
  htuOf,
  newProofKey,
  type BoundKey,
} from "../bench/dpop-proof.js";
import { runLoad } from "../bench/load.js";
import {
  accessTokenHash as gatehouseAth,
  createProofVerifier,
  normalizedHtu,
} from "../src/tokens/dpop-proof.js";
import { startUpstream } from "./helpers/upstream.js";

// gatehouse's own verifier, as `tokens.dpop: { algorithms: [ES256] }` configures it.
const verifier = () =>
  createProofVerifier({
    algorithms: ["ES256"],
    iatWindowSeconds: 300,
    clockToleranceSeconds: 0,
    nonces: undefined,
  });

t.test("a bench proof verifies with its embedded key and passes gatehouse's checks", async (t) => {
  const prover = createProver(newProofKey());
  const token = "an-access-token";
  const url = "http://127.0.0.1:8080/v1/orders?translation_language=FR,de";
  const proof = prover.proof("GET", htuOf(url), accessTokenHash(token));

  const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, {
    typ: "dpop+jwt",
    algorithms: ["ES256"],
  });
  t.equal(protectedHeader.alg, "ES256");
  t.same(protectedHeader.jwk, prover.jwk, "the header carries the prover's public key");
  t.notOk("d" in (protectedHeader.jwk ?? {}), "and never its private part");
  t.equal(payload.htm, "GET");
  t.equal(payload.htu, "http://127.0.0.1:8080/v1/orders", "the URL without its query");
  t.equal(payload.ath, gatehouseAth(token), "ath is the token's SHA-256, as gatehouse hashes it");
  t.ok(Number.isInteger(payload.iat), "iat in whole seconds");
  t.type(payload.jti, "string");

  const again = await jwtVerify(prover.proof("GET", htuOf(url)), EmbeddedJWK, {
    typ: "dpop+jwt",
  });
  t.not(again.payload.jti, payload.jti, "every proof has a jti of its own");
  t.notOk("ath" in again.payload, "a proof for the token endpoint has no ath");

  const jkt = await calculateJwkThumbprint(prover.jwk);
  const checked = await verifier().verify(
    proof,
    { method: "GET", url: normalizedHtu(url) as string, accessToken: token, jkt },
    (payload.iat as number) * 1000,
  );
  t.equal(checked.jkt, jkt, "gatehouse finds the key the token would be bound to");
  t.equal(checked.jti, payload.jti);
});

t.test(
  "the load generator sends every request with a new proof, taking the keys in turn",
  async (t) => {
    const upstream = await startUpstream();
    const dir = await mkdtemp(join(tmpdir(), "gatehouse-bench-dpop-"));
    t.teardown(async () => {
      await upstream.close();
      await rm(dir, { recursive: true, force: true });
    });
    const keys: BoundKey[] = [0, 1, 2].map((i) => ({ key: newProofKey(), token: `token-${i}` }));
    const keysFile = join(dir, "keys.json");
    await writeFile(keysFile, JSON.stringify({ keys }));
    const jkts = new Map<string, string>();
    for (const { key, token } of keys) {
      jkts.set(`DPoP ${token}`, await calculateJwkThumbprint(createProver(key).jwk));
    }

    const load = { connections: 4, durationS: 1, rate: 200, cores: null };
    const path = "/v1/orders?translation_language=FR,de";
    const result = await runLoad(
      upstream.url + path,
      { "x-bench": "1" },
      load,
      undefined,
      keysFile,
    );

    t.equal(result.non2xx + result.errors, 0);
    t.ok(result.completed > 0, "requests were answered");
    // One request per connection at least: each connection's first one is made as it opens.
    t.ok(upstream.received.length >= load.connections);
    const check = verifier();
    const jtis = new Set<string>();
    const used = new Set<string>();
    const problems: string[] = [];
    const url = normalizedHtu(`${upstream.url}/v1/orders`) as string;
    for (const { url: sent, headers } of upstream.received) {
      const authorization = String(headers.authorization);
      const jkt = jkts.get(authorization);
      if (sent !== path || headers["x-bench"] !== "1" || jkt === undefined) {
        problems.push(`${sent} x-bench=${headers["x-bench"]} ${authorization}`);
        continue;
      }
      const proof = String(headers.dpop);
      const { iat } = decodeJwt(proof) as { iat: number };
      const accessToken = authorization.slice("DPoP ".length);
      try {
        const checked = await check.verify(
          proof,
          { method: "GET", url, accessToken, jkt },
          iat * 1000,
        );
        jtis.add(checked.jti);
        used.add(authorization);
      } catch (error) {
        problems.push((error as Error).message);
      }
    }
    t.same(problems, [], "each request: its path, the target's headers, a token and its proof");
    t.equal(jtis.size, upstream.received.length, "no proof was sent twice");
    t.equal(used.size, keys.length, "every key signed some of the requests");
  },
);
