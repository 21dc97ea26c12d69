/**
 * Every refused DPoP proof costs gatehouse a signature check, so it counts against the address in
 * `tokens.failure_limit` as a failed client authentication does (docs/dpop.md): at the token
 * endpoint a header too long, a proof that breaks a rule and one without the current nonce; at
 * the door a proof without the current nonce too. Through real sockets, each address its own
 * through `X-Forwarded-For` from a trusted proxy.
 */
import t from "tap";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";
import { json, send } from "./helpers/client.js";
import { dpopHeaders, dpopKey, dpopTokenRequest, proof } from "./helpers/dpop.js";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "reporting-secret-0123456789abcdef" };
const NOW = Date.UTC(2026, 5, 1, 12);
const NOW_S = NOW / 1000;
const KEY = await dpopKey();

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/** A gatehouse allowing 3 failures a minute per address, with server nonces. */
async function gatehouse(): Promise<TestGatehouse> {
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `trusted_proxies: [127.0.0.1]
tokens:
  failure_limit: { limit: 3, window: 1m }
  dpop: { nonce: true }
${await clientsYaml([APP])}routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
    { now: () => NOW },
  );
  t.teardown(() => g.close());
  return g;
}

/** A token request of APP from `ip` with the DPoP header `dpop`. */
const tokenRequest = (g: TestGatehouse, ip: string, dpop: string) =>
  dpopTokenRequest(g.url, APP, dpop, { "x-forwarded-for": ip });

/** A proof by KEY for a token request to `g`, with `nonce` and `more` claims. */
const tokenProof = (g: TestGatehouse, nonce?: string, claims: Record<string, unknown> = {}) =>
  proof(KEY, { htm: "POST", htu: `${g.url}/oauth/token`, iat: NOW_S, nonce, claims });

t.test("refused proofs at the token endpoint count against the address", async (t) => {
  const g = await gatehouse();
  const ip = "198.51.100.7";
  const first = await tokenRequest(g, ip, await tokenProof(g));
  t.equal(json(first).error, "use_dpop_nonce", "no nonce: refused");
  const nonce = String(first.headers["dpop-nonce"]);
  const wrongMethod = await tokenRequest(g, ip, await tokenProof(g, nonce, { htm: "GET" }));
  t.equal(json(wrongMethod).error_description, PROOF_RULES.htm, "a rule broken: refused");
  const large = await tokenProof(g, nonce, { pad: "p".repeat(6200) });
  t.equal(json(await tokenRequest(g, ip, large)).error_description, PROOF_RULES.too_large);

  const guess = { ...APP, secret: "a-guess-at-the-reporting-secret" };
  const limited = await dpopTokenRequest(g.url, guess, await tokenProof(g, nonce), {
    "x-forwarded-for": ip,
  });
  t.equal(
    limited.status,
    429,
    "three refusals: a secret not remembered from that address is limited",
  );
  t.equal(json(limited).error, "rate_limited");
  // APP's secret matched with the first request: remembered, it is no guess, and its client's
  // proof is checked (docs/dpop.md).
  const served = await tokenRequest(g, ip, await tokenProof(g, nonce));
  t.equal(json(served).token_type, "DPoP", "the remembered secret with a good proof is served");
  const elsewhere = await tokenRequest(g, "198.51.100.8", await tokenProof(g, nonce));
  t.equal(elsewhere.status, 200, "another address is served");
  t.equal(json(elsewhere).token_type, "DPoP");
});

t.test("proofs without the current nonce at the door count against the address", async (t) => {
  const g = await gatehouse();
  const issued = await tokenRequest(g, "198.51.100.20", await tokenProof(g));
  const nonce = String(issued.headers["dpop-nonce"]);
  const bound = json(await tokenRequest(g, "198.51.100.20", await tokenProof(g, nonce)));
  const token = bound.access_token as string;
  const url = `${g.url}/v1/items`;
  const ask = async (ip: string, withNonce?: string) =>
    send(url, {
      headers: {
        ...dpopHeaders(
          token,
          await proof(KEY, { htm: "GET", htu: url, iat: NOW_S, token, nonce: withNonce }),
        ),
        "x-forwarded-for": ip,
      },
    });
  for (let i = 0; i < 3; i++) {
    const answer = await ask("198.51.100.21");
    t.equal(json(answer).error, "use_dpop_nonce", `no nonce ${i + 1}: refused`);
  }
  const limited = await ask("198.51.100.21", nonce);
  t.equal(limited.status, 429, "then a proof with the nonce from that address is limited");
  t.equal(json(limited).error, "rate_limited");
  t.equal((await ask("198.51.100.22", nonce)).status, 200, "another address is served");
});
