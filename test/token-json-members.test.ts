/**
 * A token request's JSON body through a real socket: a member named twice is refused, as a form
 * parameter sent twice is (RFC 6749 §3.2), rather than JSON.parse silently keeping the last one.
 */
import t from "tap";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { clientsYaml, postToken, type TestClient } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const APP: TestClient = { id: "reporting-app", secret: "correct-horse-battery-staple-42" };

const upstream = await startUpstream();
const g = await startTestGatehouse(configFor(upstream.url, await clientsYaml([APP])));
t.teardown(async () => {
  await g.close();
  await upstream.close();
});

const GRANT = '"grant_type":"client_credentials"';
const SECRET = `"client_secret":${JSON.stringify(APP.secret)}`;
const ID = `"client_id":${JSON.stringify(APP.id)}`;

const postJson = (body: string) =>
  postToken(g.url, { headers: { "content-type": "application/json" }, body });

const repeated: Array<[string, string]> = [
  ["client_id twice, with different values", `{${GRANT},"client_id":"a",${ID},${SECRET}}`],
  ["client_id twice, with the same value", `{${GRANT},${ID},${ID},${SECRET}}`],
  ["grant_type twice", `{${GRANT},${GRANT},${ID},${SECRET}}`],
  ["a member gatehouse does not read, twice", `{${GRANT},${ID},${SECRET},"scope":"a","scope":"b"}`],
  ["a name written with an escape", `{${GRANT},${ID},"client\\u005fid":"b",${SECRET}}`],
  ["client_id and its alias CLIENT_ID", `{${GRANT},${ID},"CLIENT_ID":"b",${SECRET}}`],
];

for (const [what, body] of repeated) {
  t.test(`a JSON token request with ${what} is 400 invalid_request`, async (t) => {
    const answer = await postJson(body);
    t.equal(answer.status, 400);
    t.match(answer.headers["content-type"], /^application\/json/);
    t.equal(answer.headers["cache-control"], "no-store");
    t.equal(answer.json.error, "invalid_request");
    t.match(answer.json.error_description, /more than once/);
    t.notOk("access_token" in answer.json, "no token is issued");
  });
}

t.test("names repeated only inside a nested value do not count", async (t) => {
  const answer = await postJson(
    `{"extra":{"k":1,"k":[{"k":"}"}]},"list":["client_id","client_id"],${GRANT},${ID},${SECRET}}`,
  );
  t.equal(answer.status, 200);
  t.type(answer.json.access_token, "string");
});
