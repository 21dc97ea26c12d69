/**
 * A provider's client whose id differs from an own client's only in case is the same id to an
 * upstream that compares ids without case, as the config's own duplicate check compares them:
 * unlisted, its token is refused as `bearer_client_id_collision`, through real sockets with
 * oidc-provider issuing it (`check`'s warning about a listed one is in warnings.test.ts).
 */
import t from "tap";
import { json, send } from "./helpers/client.js";
import { configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startProvider, type ProviderClient } from "./helpers/provider.js";
import { clientsYaml, obtainToken } from "./helpers/tokens.js";
import { startUpstream } from "./helpers/upstream.js";

const RESOURCE = "https://api.example.com";
// The provider's client, and an own client whose id differs only in case.
const PARTNER: ProviderClient = { id: "Partner-X", secret: "partner-secret", scope: "items:read" };
const OWN = { id: "partner-x", secret: "own-partner-x-secret-long-enough" };

const upstream = await startUpstream();
t.teardown(() => upstream.close());

t.test("an unlisted provider client whose id differs only in case is refused", async (t) => {
  const provider = await startProvider({
    resource: RESOURCE,
    clients: [PARTNER],
    scopes: ["items:read"],
  });
  t.teardown(() => provider.close());
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `tokens:
  audience: ${RESOURCE}
  trusted_issuers:
    - name: corp
      issuer: ${provider.issuer}
      plan: partner
${await clientsYaml([OWN])}plans:
  partner:
    rate_limit: { limit: 100, window: 1h }
routes:
  - path: /v1/items
    methods: [GET]
`,
    ),
  );
  t.teardown(() => g.close());
  const before = upstream.received.length;
  const token = await provider.token(PARTNER);
  const answer = await send(`${g.url}/v1/items`, {
    headers: { authorization: `Bearer ${token}` },
  });
  t.equal(answer.status, 401);
  t.match(json(answer), {
    error: "invalid_token",
    message: "the client id is taken by another client",
  });
  const line = await g.logged(
    (entry) => entry.msg === "request" && entry.requestId === answer.headers["x-request-id"],
  );
  t.equal(line.reason, "bearer_client_id_collision");
  t.equal(upstream.received.length, before, "nothing forwarded");
  const own = await obtainToken(g.url, OWN);
  const served = await send(`${g.url}/v1/items`, { headers: { authorization: `Bearer ${own}` } });
  t.equal(served.status, 200, "the own client is served");
});
