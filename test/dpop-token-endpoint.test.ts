/**
 * DPoP at the token endpoint (RFC 9449 §5; docs/dpop.md) with real clients that find it through
 * its RFC 8414 metadata: oauth4webapi and openid-client get DPoP-bound tokens, with and without
 * server nonces (§8), each token's `cnf.jkt` the thumbprint of the client's key (§6.1).
 * test/dpop-token-proofs.test.ts refuses hand-made proofs rule by rule.
 */
import t, { type Test } from "tap";
import * as oauth from "oauth4webapi";
import * as oidc from "openid-client";
import { calculateJwkThumbprint, exportJWK, type CryptoKey } from "jose";
import { configFor, startTestGatehouse, type TestGatehouse } from "./helpers/gatehouse.js";
import { claimsOf, clientsYaml, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";

const APP: TestClient = { id: "reporting-app", secret: "reporting-secret-0123456789abcdef" };
const ALGORITHMS = ["ES256", "EdDSA", "PS256", "RS256"];

const upstream = await startUpstream();
t.teardown(() => upstream.close());

/** A config for APP with `tokens` lines (indented two spaces). */
async function yaml(tokens: string): Promise<string> {
  return configFor(upstream.url, `tokens:\n${tokens}${await clientsYaml([APP])}`);
}

/** A gatehouse on the real clock whose issuer is its own loopback URL, so clients discover it. */
async function discoverable(t: Test, dpop: string): Promise<{ g: TestGatehouse; issuer: URL }> {
  const g = await startTestGatehouse(await yaml(`  dpop: ${dpop}\n`));
  t.teardown(() => g.close());
  const issuer = `http://127.0.0.1:${g.port}`;
  await g.writeConfig(await yaml(`  issuer: ${issuer}\n  dpop: ${dpop}\n`));
  t.equal(await g.gatehouse.reload(), "success", "the issuer names the gatehouse's port");
  return { g, issuer: new URL(issuer) };
}

/** The thumbprint of `publicKey` (RFC 7638), as a bound token's cnf.jkt names it. */
async function thumbprint(publicKey: CryptoKey): Promise<string> {
  return calculateJwkThumbprint(await exportJWK(publicKey));
}

t.test("oauth4webapi", async (t) => {
  const plain = await discoverable(t, "{}");
  const nonced = await discoverable(t, "{ nonce: true }");
  const client: oauth.Client = { client_id: APP.id };
  const auth = oauth.ClientSecretPost(APP.secret);
  const insecure = { [oauth.allowInsecureRequests]: true };
  const discover = async (issuer: URL) =>
    oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: "oauth2", ...insecure }),
    );

  t.test("gets a DPoP-bound token, cnf.jkt its key's thumbprint", async (t) => {
    const as = await discover(plain.issuer);
    t.strictSame(as.dpop_signing_alg_values_supported, ALGORITHMS, "RFC 8414 metadata");
    const keyPair = await oauth.generateKeyPair("ES256");
    const DPoP = oauth.DPoP(client, keyPair);
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      client,
      auth,
      {},
      {
        DPoP,
        ...insecure,
      },
    );
    t.equal(response.headers.get("dpop-nonce"), null, "no nonce without tokens.dpop.nonce");
    const tokens = await oauth.processClientCredentialsResponse(as, client, response);
    t.equal(tokens.token_type, "dpop", "DPoP, which oauth4webapi lower-cases");
    const jkt = await thumbprint(keyPair.publicKey);
    t.strictSame(claimsOf(tokens.access_token).cnf, { jkt });
    t.equal(await DPoP.calculateThumbprint(), jkt);
  });

  t.test("retries once with the nonce the server gave, as documented", async (t) => {
    const as = await discover(nonced.issuer);
    const keyPair = await oauth.generateKeyPair("ES256");
    const DPoP = oauth.DPoP(client, keyPair);
    const request = () =>
      oauth.clientCredentialsGrantRequest(as, client, auth, {}, { DPoP, ...insecure });
    const first = await request();
    const refusal = await oauth.processClientCredentialsResponse(as, client, first).then(
      () => undefined,
      (error: unknown) => error,
    );
    t.ok(oauth.isDPoPNonceError(refusal), "use_dpop_nonce");
    t.equal((refusal as oauth.ResponseBodyError).status, 400);
    t.match(first.headers.get("dpop-nonce"), /^[A-Za-z0-9_-]{30}$/);
    const second = await request();
    t.match(second.headers.get("dpop-nonce"), /^[A-Za-z0-9_-]{30}$/, "a nonce on success too");
    const tokens = await oauth.processClientCredentialsResponse(as, client, second);
    t.equal(tokens.token_type, "dpop");
    t.strictSame(claimsOf(tokens.access_token).cnf, { jkt: await thumbprint(keyPair.publicKey) });
  });
});

t.test("oauth4webapi signs with an Ed25519 key as Ed25519, unless told EdDSA", async (t) => {
  const { issuer } = await discoverable(t, "{}");
  const as = await oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, {
      algorithm: "oauth2",
      [oauth.allowInsecureRequests]: true,
    }),
  );
  const client: oauth.Client = { client_id: APP.id };
  const keyPair = await oauth.generateKeyPair("Ed25519");
  const grant = (DPoP: oauth.DPoPHandle) =>
    oauth
      .clientCredentialsGrantRequest(
        as,
        client,
        oauth.ClientSecretPost(APP.secret),
        {},
        {
          DPoP,
          [oauth.allowInsecureRequests]: true,
        },
      )
      .then((response) => oauth.processClientCredentialsResponse(as, client, response));
  // The fully-specified name newer JOSE libraries use, which tokens.dpop.algorithms does not list.
  const refusal = await grant(oauth.DPoP(client, keyPair)).then(
    () => undefined,
    (error: unknown) => error as oauth.ResponseBodyError,
  );
  t.equal(refusal?.error, "invalid_dpop_proof");
  t.equal(refusal?.error_description, PROOF_RULES.algorithm);
  // The remap oauth4webapi and openid-client document for servers that know EdDSA only.
  const remapEd25519: oauth.ModifyAssertionOptions = {
    [oauth.modifyAssertion]: (header) => {
      if (header.alg === "Ed25519") header.alg = "EdDSA";
    },
  };
  const tokens = await grant(oauth.DPoP(client, keyPair, remapEd25519));
  t.equal(tokens.token_type, "dpop");
  t.strictSame(claimsOf(tokens.access_token).cnf, { jkt: await thumbprint(keyPair.publicKey) });
});

t.test("openid-client, through discovery", async (t) => {
  for (const [name, dpop, requests] of [
    ["without nonces", "{}", 1],
    ["with nonces, retrying by itself", "{ nonce: true }", 2],
  ] as const) {
    t.test(name, async (t) => {
      const { issuer } = await discoverable(t, dpop);
      const config = await oidc.discovery(
        issuer,
        APP.id,
        undefined,
        oidc.ClientSecretBasic(APP.secret),
        {
          execute: [oidc.allowInsecureRequests],
          algorithm: "oauth2",
        },
      );
      let sent = 0;
      config[oidc.customFetch] = (url, options) => {
        sent++;
        return fetch(url, options);
      };
      const keyPair = await oidc.randomDPoPKeyPair("ES256");
      const DPoP = oidc.getDPoPHandle(config, keyPair);
      const tokens = await oidc.clientCredentialsGrant(config, {}, { DPoP });
      t.equal(sent, requests, "token requests sent");
      t.equal(tokens.token_type, "dpop");
      t.strictSame(claimsOf(tokens.access_token).cnf, { jkt: await thumbprint(keyPair.publicKey) });
    });
  }
});
