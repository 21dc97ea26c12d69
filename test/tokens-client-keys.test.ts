/** A private_key_jwt client's JWKS file: which keys are accepted, and the algorithms each allows. */
import t from "tap";
import { generateKeyPairSync } from "node:crypto";
import { exportJWK, generateKeyPair } from "jose";
import { parseClientKeys } from "../src/tokens/client-keys.js";

const publicJwk = async (alg: string, options: Record<string, unknown> = {}) =>
  exportJWK((await generateKeyPair(alg, { extractable: true, ...options })).publicKey);
const document = (...keys: unknown[]) => JSON.stringify({ keys });

t.test("accepted keys and the algorithms pinned to their type", async (t) => {
  const ec = await publicJwk("ES256");
  const ed = await publicJwk("EdDSA");
  const rsa = await publicJwk("RS256", { modulusLength: 2048 });
  const cases: Array<[string, string, string[]]> = [
    ["P-256", document(ec), ["ES256"]],
    ["Ed25519", document(ed), ["EdDSA"]],
    ["RSA 2048", document(rsa), ["PS256", "RS256"]],
    ["RSA pinned to PS256", document({ ...rsa, alg: "PS256" }), ["PS256"]],
    ["two keys", document({ ...ec, use: "sig" }, ed), ["ES256", "EdDSA"]],
  ];
  for (const [name, text, algorithms] of cases) {
    const keys = await parseClientKeys(text);
    t.strictSame(typeof keys === "string" ? keys : keys.algorithms, algorithms, name);
  }
});

t.test("refused files say why", async (t) => {
  const ec = await publicJwk("ES256");
  const p384 = await publicJwk("ES384");
  // jose will not make a key this small; node:crypto will.
  const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({
    format: "jwk",
  });
  const privateEc = await exportJWK(
    (await generateKeyPair("ES256", { extractable: true })).privateKey,
  );
  const cases: Array<[string, string, RegExp]> = [
    ["not JSON", "{", /is not JSON/],
    ["no keys", document(), /at least one key/],
    ["an HMAC key", document({ kty: "oct", k: "c2VjcmV0" }), /private key material/],
    ["a private key", document(privateEc), /private key material/],
    ["P-384", document(p384), /Ed25519 \(OKP\), P-256 \(EC\) or RSA/],
    ["RSA 1024", document(small), /1024-bit RSA key; at least 2048/],
    ["use enc", document({ ...ec, use: "enc" }), /use "enc"/],
    ["alg of another type", document({ ...ec, alg: "HS256" }), /alg "HS256", not ES256/],
    ["a broken key", document({ ...ec, x: "AA" }), /keys\[0\] is not a usable key/],
  ];
  for (const [name, text, message] of cases) {
    const keys = await parseClientKeys(text);
    t.match(keys, message, name);
  }
});
