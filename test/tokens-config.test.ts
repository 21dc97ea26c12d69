/**
 * Problems found while compiling the token settings (keys, secrets) are reported like schema
 * errors: one fixture each, with the exact FILE:LINE:COL line `gatehouse check` prints.
 */
import t from "tap";
import { checkConfigFixtures } from "./helpers/config-fixtures.js";
import { loadSnapshot } from "../src/config/snapshot.js";
import { createEphemeralKeys } from "../src/tokens/keys.js";
import { createPlainSecrets, verifySecret } from "../src/tokens/secrets.js";

const DIR = "test/fixtures/tokens";
const ENV = { GATEHOUSE_TEST_SHORT: "only-31-bytes-of-hs256-secret!!" };

const expected: Record<string, string[]> = {
  "key-file-missing.yaml": [
    '6:15 tokens.signing.key_file: cannot read "./no-such-key.pem" (ENOENT)',
  ],
  "key-file-not-a-key.yaml": [
    '6:15 tokens.signing.key_file: is not a PKCS#8 PEM private key for ES256 ("pkcs8" must be PKCS#8 formatted string); make one with gatehouse keygen --alg ES256',
  ],
  "secret-env-unset.yaml": [
    "6:17 tokens.signing.secret_env: names GATEHOUSE_TEST_UNSET, which is not set",
  ],
  "secret-env-short.yaml": [
    "6:17 tokens.signing.secret_env: GATEHOUSE_TEST_SHORT holds 31 bytes; HS256 needs at least 32",
  ],
  "previous-key-missing.yaml": [
    '5:7 tokens.previous_keys[0]: cannot read "./retired.pub.pem" (ENOENT)',
  ],
  "client-secret-hash-malformed.yaml": [
    '5:18 clients[0].secret_hash: is not a value printed by "gatehouse hash-secret" (scrypt$ln=..,r=..,p=..$salt$key)',
    "7:18 clients[1].secret_hash: has scrypt parameters out of range (ln 10-20, r 1-16, p 1-4)",
  ],
  "client-secret-env-unset.yaml": [
    "5:17 clients[0].secret_env: names REPORTING_APP_SECRET, which is not set",
  ],
};

checkConfigFixtures(t, DIR, expected, ENV);

t.test(
  "without a key, the process's generated key signs, the same one on every load",
  async (t) => {
    const ephemeralKeys = createEphemeralKeys();
    const withSecret = `${DIR}/client-secret-env-unset.yaml`;
    const env = { REPORTING_APP_SECRET: "a-long-client-secret-from-the-env" };
    const first = await loadSnapshot(withSecret, { env, ephemeralKeys });
    const second = await loadSnapshot(withSecret, { env, ephemeralKeys });
    t.ok(first.tokens.ephemeralKey, "flagged, so a warning is logged");
    t.equal(first.tokens.keys.current.kid, second.tokens.keys.current.kid, "one key per process");
    const other = await loadSnapshot(withSecret, { env });
    t.not(
      other.tokens.keys.current.kid,
      first.tokens.keys.current.kid,
      "another process, another key",
    );
    t.ok(first.tokens.clients.secrets.has("reporting-app"), "the secret_env client is known");
  },
);

t.test("a secret_env secret is derived once per process, however often it loads", async (t) => {
  const plainSecrets = createPlainSecrets();
  const file = `${DIR}/client-secret-env-unset.yaml`;
  const secret = "a-long-client-secret-from-the-env";
  const env = { REPORTING_APP_SECRET: secret };
  const first = await loadSnapshot(file, { env, plainSecrets });
  const second = await loadSnapshot(file, { env, plainSecrets });
  const record = first.tokens.clients.secrets.get("reporting-app");
  if (record === undefined) throw new Error("the secret_env client is missing");
  t.equal(second.tokens.clients.secrets.get("reporting-app"), record, "the same record");
  t.ok(await verifySecret(secret, record), "which the secret matches");
  t.notOk(await verifySecret(`${secret}!`, record), "and another secret does not");
  const other = await loadSnapshot(file, { env });
  t.not(other.tokens.clients.secrets.get("reporting-app"), record, "another process derives anew");
  const changed = await loadSnapshot(file, {
    env: { REPORTING_APP_SECRET: "another-secret" },
    plainSecrets,
  });
  const changedRecord = changed.tokens.clients.secrets.get("reporting-app");
  t.not(changedRecord, record, "a different secret gets its own record");
  t.ok(changedRecord && (await verifySecret("another-secret", changedRecord)), "which it matches");
});
