/**
 * With the memory store and `limits.state_file`, the process's marks outlive a restart: a revoked
 * token stays refused (RFC 7009 §2) and a used client assertion stays used (RFC 7523 §3 item 7).
 * Run as operators run it: the built `gatehouse` command, stopped with SIGTERM and started again
 * on the same files, with a signing key from a file so that tokens outlive the process. Without
 * `state_file`, the start says that a restart forgets them. A file written before marks were
 * saved still loads.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t from "tap";
import { generateKeyPem } from "../src/tokens/keys.js";
import {
  assertion,
  assertionRequest,
  jwksFiles,
  keyClient,
  keyClientsYaml,
  revokeWithSecret,
} from "./helpers/assertions.js";
import { startCli } from "./helpers/cli.js";
import { eventually } from "./helpers/client.js";
import { clientsYaml, obtainToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const ISSUER = "https://auth.example.com";
const APP: TestClient = { id: "reporting-app", secret: "b7e2c9d4a1f6e3b8c5d2a9f4e1b6c3d8" };
const batch = await keyClient("batch-job", "ES256");

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const dir = await mkdtemp(join(tmpdir(), "gatehouse-marks-"));
t.teardown(() => rm(dir, { recursive: true, force: true }));
await writeFile(join(dir, "signing.pem"), await generateKeyPem("EdDSA"));
for (const [name, text] of Object.entries(jwksFiles([batch]))) {
  await writeFile(join(dir, name), text);
}

async function configFile(name: string, limits: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(
    path,
    `listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream:
  url: ${upstream.url}
tokens:
  issuer: ${ISSUER}
  signing:
    algorithm: EdDSA
    key_file: signing.pem
${await clientsYaml([APP])}${keyClientsYaml([batch])}${limits}routes:
  - path: /v1/items
    methods: [GET]
`,
  );
  return path;
}

const bearer = (url: string, token: string) =>
  fetch(`${url}/v1/items`, { headers: { authorization: `Bearer ${token}` } }).then(
    async (response) => {
      await response.arrayBuffer();
      return response.status;
    },
  );

const RESTART_FORGETS = /kept in this process only and forgotten at a restart/;

t.test("revocations and used assertions survive a restart with state_file", async (t) => {
  const path = await configFile("with-state.yaml", "limits:\n  state_file: state.json\n");
  const first = await startCli(["--config", path]);
  const revoked = await obtainToken(first.url, APP);
  const kept = await obtainToken(first.url, APP);
  t.equal(await bearer(first.url, revoked), 200, "valid before its revocation");
  t.equal((await revokeWithSecret(first.url, APP, revoked)).status, 200);
  t.equal(await bearer(first.url, revoked), 401, "refused once revoked");
  // As authlib signs it: an hour long.
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const used = await assertion(batch, Date.now(), ISSUER, { exp });
  t.equal((await assertionRequest(first.url, used)).status, 200, "the assertion's first use");
  t.notOk(
    first.lines().some((line) => RESTART_FORGETS.test(String(line.msg))),
    "no line about forgetting: the state file keeps them",
  );
  t.equal(await first.stop("SIGTERM"), 0);

  const saved = JSON.parse(await readFile(join(dir, "state.json"), "utf8")) as {
    marks: { revoked: unknown[]; used: unknown[] };
  };
  t.equal(saved.marks.revoked.length, 1, "the revoked id is in the file");
  t.equal(saved.marks.used.length, 1, "and the used assertion id");
  t.match(
    saved.marks.used[0],
    { client: batch.id, endsAt: (exp + 30) * 1000 },
    "held until its exp and the clock tolerance",
  );

  const second = await startCli(["--config", path]);
  t.teardown(() => second.stop("SIGTERM"));
  t.equal(await bearer(second.url, kept), 200, "the key outlived the restart: tokens still pass");
  t.equal(await bearer(second.url, revoked), 401, "the revoked token is still refused");
  const replayed = await assertionRequest(second.url, used);
  t.equal(replayed.status, 401, "the used assertion is refused after the restart");
  t.equal(replayed.json.error, "invalid_client");
  const fresh = await assertion(batch, Date.now(), ISSUER);
  t.equal((await assertionRequest(second.url, fresh)).status, 200, "a new assertion is accepted");
});

t.test("a revocation reaches the state file before a kill -9 can take it", async (t) => {
  const path = await configFile("killed.yaml", "limits:\n  state_file: killed.json\n");
  const first = await startCli(["--config", path]);
  const revoked = await obtainToken(first.url, APP);
  t.equal((await revokeWithSecret(first.url, APP, revoked)).status, 200);
  const used = await assertion(batch, Date.now(), ISSUER);
  t.equal((await assertionRequest(first.url, used)).status, 200);
  // Saved soon after, without a shutdown: read until both marks are there.
  const saved = async () => {
    try {
      const text = await readFile(join(dir, "killed.json"), "utf8");
      const { marks } = JSON.parse(text) as { marks: { revoked: unknown[]; used: unknown[] } };
      return marks.revoked.length === 1 && marks.used.length === 1;
    } catch {
      return false;
    }
  };
  t.ok(await eventually(saved), "both marks are in the file while the process runs");
  await first.stop("SIGKILL");

  const second = await startCli(["--config", path]);
  t.teardown(() => second.stop("SIGTERM"));
  t.equal(await bearer(second.url, revoked), 401, "the revoked token is still refused");
  t.equal((await assertionRequest(second.url, used)).status, 401, "the used assertion too");
});

t.test("a state file written before marks were saved still loads", async (t) => {
  const endsAt = Date.now() + 60 * 60 * 1000;
  await writeFile(
    join(dir, "old-state.json"),
    JSON.stringify({
      version: 2,
      savedAt: Date.now(),
      counters: [{ key: "rate:plan:anonymous:default:3600000|ip:127.0.0.1", value: 1, endsAt }],
    }),
  );
  const path = await configFile("old-state.yaml", "limits:\n  state_file: old-state.json\n");
  const cli = await startCli(["--config", path]);
  t.teardown(() => cli.stop("SIGTERM"));
  const restored = await cli.line((line) => /restored from the state file/.test(String(line.msg)));
  t.match(restored, { level: "info", revoked: 0, usedAssertions: 0 });
  t.notOk(
    cli.lines().some((line) => /unreadable/.test(String(line.msg))),
    "not unreadable",
  );
  t.equal(await bearer(cli.url, await obtainToken(cli.url, APP)), 200);
});

t.test("without state_file, the start says a restart forgets revocations", async (t) => {
  const path = await configFile("no-state.yaml", "");
  const cli = await startCli(["--config", path]);
  const said = cli.lines().filter((line) => RESTART_FORGETS.test(String(line.msg)));
  t.equal(said.length, 1, "said once");
  t.match(said[0], { level: "info", msg: /limits\.state_file keeps them/ });
  t.equal(await cli.stop("SIGTERM"), 0);
});
