/**
 * What a config needs from where it runs: key files that are there but empty are refused by
 * name, and `gatehouse check --no-env` checks a deployment's file away from its variables and
 * mounted files, reporting everything else.
 */
import t from "tap";
import { runCli } from "./helpers/cli.js";
import { checkConfigFixtures } from "./helpers/config-fixtures.js";

const DIR = "test/fixtures/environment";

// The built command, run without holding this process's event loop: a config read meanwhile
// would otherwise find its deadline passed before its answer could be taken.
function check(file: string, ...options: string[]) {
  return runCli(["check", "--config", `${DIR}/${file}`, ...options], { GATEHOUSE_CONFIG: "" });
}

const EMPTY_KEYS = [
  `6:15 tokens.signing.key_file: "empty.pem" is empty; make a key with gatehouse keygen --out empty.pem`,
  `8:7 tokens.previous_keys[0]: "blank.pub.pem" is empty; write the old key's public half with gatehouse pubkey OLD.pem > blank.pub.pem`,
];

t.test("an empty key file is refused as empty, at start and by check", async (t) => {
  checkConfigFixtures(t, DIR, { "empty-key-files.yaml": EMPTY_KEYS });
  const checked = await check("empty-key-files.yaml");
  t.equal(checked.status, 1);
  const where = `${DIR}/empty-key-files.yaml`;
  t.equal(checked.stderr, EMPTY_KEYS.map((line) => `${where}:${line}\n`).join(""));
  t.equal(
    (await check("empty-key-files.yaml", "--no-env")).stderr,
    checked.stderr,
    "--no-env too: the file is there",
  );
});

t.test("check --no-env leaves out unset variables and missing files, nothing else", async (t) => {
  const full = await check("deployed.yaml");
  t.equal(full.status, 1, "without --no-env, the deployment's variables and key are missing");
  t.strictSame(full.stderr.trimEnd().split("\n").sort(), [
    `${DIR}/deployed.yaml:10:17 clients[0].secret_env: names GATEHOUSE_TEST_UNSET_CLIENT_SECRET, which is not set`,
    `${DIR}/deployed.yaml:15:19 limits.redis.password_env: names GATEHOUSE_TEST_UNSET_REDIS_PASSWORD, which is not set`,
    `${DIR}/deployed.yaml:2:18 admin_token_env: names GATEHOUSE_TEST_UNSET_ADMIN_TOKEN, which is not set`,
    `${DIR}/deployed.yaml:7:15 tokens.signing.key_file: cannot read "/gatehouse-test-mounted-at-deploy/signing.pem" (ENOENT)`,
  ]);
  const away = await check("deployed.yaml", "--no-env");
  t.equal(away.status, 0);
  t.equal(away.stderr, "");
  t.equal(
    away.stdout,
    `${DIR}/deployed.yaml: ok (1 route, 1 client, 1 plan; upstream http://127.0.0.1:3000/; variables and missing files not checked)\n`,
  );
  // A file the schema refuses is checked for its surroundings on the raw data: --no-env holds there too.
  const mistaken = await check("deployed-hs256.yaml", "--no-env");
  t.equal(mistaken.status, 1);
  t.equal(
    mistaken.stderr,
    `${DIR}/deployed-hs256.yaml:12:11 clients[0].plan: names no plan; known plans: default\n`,
  );
  t.match(
    (await check("deployed-hs256.yaml")).stderr,
    /secret_env: names GATEHOUSE_TEST_UNSET_SIGNING_SECRET/,
  );
});

t.test("--no-env is an option of check only", async (t) => {
  const result = await runCli(["keygen", "--no-env"]);
  t.equal(result.status, 2);
  t.match(result.stderr, /^gatehouse: --no-env is an option of check, not of keygen\n/);
});
