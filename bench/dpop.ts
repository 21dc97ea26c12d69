/**
 * `dpop`: the full request with a DPoP-bound token (RFC 9449) and a fresh proof beside the same
 * request with a plain Bearer token, both through the same two gatehouse processes, which swap
 * the two kinds from round to round. Both tokens are the full scenario's client's, from the token
 * endpoint: the bound ones asked for with a proof. The load generator signs every proof
 * (dpop-load.ts), so the ratio is what checking a proof costs gatehouse: its signature, claims,
 * `ath`, the key's thumbprint against the token's `cnf.jkt`, and holding its `jti`.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { calculateJwkThumbprint, decodeJwt } from "jose";
import { createProver, newProofKey, PROOF_ALGORITHM, type BoundKey } from "./dpop-proof.js";
import type { Served } from "./processes.js";
import {
  FULL_HEADERS,
  FULL_PATH,
  fullRequest,
  LIMITED_CLIENT,
  TOKEN_PATH,
  tokenResponse,
  type Pairing,
  type Secrets,
} from "./scenarios.js";
import type { Shared } from "./shared.js";

/**
 * How many keys the client's requests take turns signing with, each with its own token. gatehouse
 * holds at most 100,000 proof ids per key within a proof's window (300 s): one key would be
 * refused past 333 requests a second, and a run sends many times that. 64 keys allow some 21,000
 * a second to each process.
 */
export const DPOP_KEYS = 64;

/**
 * A token of the full request's client bound to a new key, asked for with a proof of that key.
 * Throws unless the token endpoint answered with a DPoP token whose `cnf.jkt` is the key's.
 */
export async function boundToken(gatehouse: Served, secrets: Secrets): Promise<BoundKey> {
  const key = newProofKey();
  const prover = createProver(key);
  const url = gatehouse.url + TOKEN_PATH;
  const response = await tokenResponse(gatehouse, LIMITED_CLIENT, secrets.limited, {
    dpop: prover.proof("POST", url),
  });
  const token = response.access_token;
  const cnf = decodeJwt(token).cnf as { jkt?: unknown } | undefined;
  const jkt = await calculateJwkThumbprint(prover.jwk);
  const type = String(response.token_type);
  if (type.toLowerCase() !== "dpop" || cnf?.jkt !== jkt) {
    throw new Error(
      `POST ${TOKEN_PATH} with a DPoP proof gave a ${type} token bound to ` +
        `${JSON.stringify(cnf?.jkt ?? null)}, not a DPoP token bound to the proof's key ${jkt}`,
    );
  }
  return { key, token };
}

/** Starts two gatehouse processes accepting DPoP and pairs the bound token with the Bearer one. */
export async function prepareDpop(shared: Shared): Promise<Pairing> {
  const pair = await shared.variants("gatehouse with DPoP", {
    tokens: `  dpop:
    algorithms: [${PROOF_ALGORITHM}]
    iat_window: 300s
`,
  });
  const bearer = await fullRequest(pair[0], shared.secrets);
  const keys: BoundKey[] = [];
  // One after the other: the client's secret is remembered after its first right answer.
  for (let i = 0; i < DPOP_KEYS; i++) keys.push(await boundToken(pair[0], shared.secrets));
  const keysFile = join((await shared.context()).dir, "dpop-keys.json");
  await writeFile(keysFile, JSON.stringify({ keys }), { mode: 0o600 });
  return {
    baseline: {
      label: "gatehouse, Bearer token",
      served: pair,
      path: bearer.path,
      headers: bearer.headers,
    },
    candidate: {
      label: `gatehouse, DPoP token + ${PROOF_ALGORITHM} proof`,
      served: [pair[1], pair[0]],
      path: FULL_PATH,
      headers: FULL_HEADERS,
      bound: { keys, keysFile },
    },
  };
}
