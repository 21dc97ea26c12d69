/**
 * Resource indicators through real sockets (RFC 8707; docs/tokens.md, Resource indicators): the
 * `aud` of a token for one resource and for several, `invalid_target`, and bearer enforcement
 * refusing a token minted for another resource.
 */
import t from "tap";
import { withDpop } from "./helpers/challenges.js";
import { send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import {
  claimsOf,
  clientsYaml,
  form,
  obtainToken,
  postToken,
  type TestClient,
} from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const API = "https://api.example.com";
const REPORTS = "https://reports.example.com";
const APP: TestClient = {
  id: "reporting-app",
  secret: "reporting-secret-0123456789abcdef",
  extra: [`resources: [${API}, ${REPORTS}]`],
};
const PLAIN: TestClient = { id: "plain", secret: "plain-secret-0123456789abcdef" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const g = await startTestGatehouse(
  configFor(
    upstream.url,
    `tokens:
  audience: ${API}
${await clientsYaml([APP, PLAIN])}routes:
  - path: /v1/items
    methods: [GET]
`,
  ),
);
t.teardown(() => g.close());

const resources = (...values: string[]): Array<[string, string]> =>
  values.map((value) => ["resource", value]);

async function call(token: string): Promise<number> {
  const answer = await send(`${g.url}/v1/items`, { headers: { authorization: `Bearer ${token}` } });
  return answer.status;
}

t.test("aud: the audience, one resource as a string, several as an array", async (t) => {
  const plain = await obtainToken(g.url, APP);
  t.equal(claimsOf(plain).aud, API, "no resource: tokens.audience");
  t.equal(await call(plain), 200);

  const api = await obtainToken(g.url, APP, resources(API));
  t.equal(claimsOf(api).aud, API);
  t.equal(await call(api), 200);

  const both = await obtainToken(g.url, APP, resources(REPORTS, API, REPORTS));
  t.strictSame(claimsOf(both).aud, [REPORTS, API], "each once, in the order asked");
  t.equal(await call(both), 200, "an aud array holding the audience is accepted");

  const empty = await obtainToken(g.url, PLAIN, resources(""));
  t.equal(claimsOf(empty).aud, API, "an empty resource is an omitted one");
});

t.test("a token minted for another resource is 401 invalid_token here", async (t) => {
  const reports = await obtainToken(g.url, APP, resources(REPORTS));
  t.equal(claimsOf(reports).aud, REPORTS);
  const before = upstream.received.length;
  const answer = await send(`${g.url}/v1/items`, {
    headers: { authorization: `Bearer ${reports}` },
  });
  t.equal(answer.status, 401);
  t.equal(
    answer.headers["www-authenticate"],
    withDpop(
      'Bearer realm="gatehouse", error="invalid_token", error_description="the token is not meant for this resource (aud)"',
    ),
  );
  t.equal(upstream.received.length, before, "never forwarded");
});

t.test("a resource not allowed or malformed is 400 invalid_target", async (t) => {
  const cases: Array<[TestClient, string]> = [
    [APP, "https://other.example.com"],
    [APP, `${API}#fragment`],
    [APP, "/v1/items"],
    [APP, "not a uri"],
    [PLAIN, REPORTS],
  ];
  for (const [client, resource] of cases) {
    const answer = await postToken(g.url, {
      body: form([
        ["client_id", client.id],
        ["client_secret", client.secret],
        ["resource", API],
        ["resource", resource],
      ]),
    });
    t.equal(answer.status, 400, `${client.id}: ${resource}`);
    t.equal(answer.json.error, "invalid_target");
    t.type(answer.json.error_description, "string");
    t.equal(answer.headers["cache-control"], "no-store");
  }
});
