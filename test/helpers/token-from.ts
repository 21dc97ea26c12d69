/** The gatehouse the tests of tokens a browser can send run against, in front of a `ws` echo. */
import type { IncomingMessage } from "node:http";
import type { Test } from "tap";
import { configFor, startTestGatehouse, type TestGatehouse } from "./gatehouse.js";
import { clientsYaml, obtainToken, type TestClient } from "./tokens.js";
import { startWsUpstream, type WsUpstream } from "./websocket.js";

export const APP: TestClient = { id: "dashboard", secret: "5d41402abc4b2a76b9719d911017c592" };

/** The gatehouse, its upstream, and what a test asks of them. */
export interface TokenFromRig {
  readonly g: TestGatehouse;
  readonly upstream: WsUpstream;
  /** APP's token. */
  readonly token: string;
  /** The ws: URL of a path. */
  ws(path: string): string;
  /** The last handshake the upstream took. */
  lastHandshake(): IncomingMessage;
}

/**
 * An echo upstream choosing the last protocol offered, and a gatehouse whose `/feed` reads the
 * token from Authorization, the query or a subprotocol, whose `/session` reads it from the cookie
 * gh_token for pages of `site`, whose `/sites` serves `site`'s pages, and `/plain` a plain route.
 */
export async function startTokenFromRig(t: Test, site: string): Promise<TokenFromRig> {
  const upstream = await startWsUpstream({
    handleProtocols: (offered) => [...offered].at(-1) ?? false,
  });
  t.teardown(() => upstream.close());
  const g = await startTestGatehouse(
    configFor(
      upstream.url,
      `${await clientsYaml([APP])}routes:
  - path: /feed
    methods: [GET]
    websocket: true
    token_from: [header, query, subprotocol]
  - path: /session
    methods: [GET, POST]
    websocket: true
    token_from: [{ cookie: gh_token }]
    origins: [${site}]
  - path: /sites
    methods: [GET]
    websocket: true
    origins: [${site}]
  - path: /plain
    methods: [GET]
`,
    ),
  );
  t.teardown(() => g.close());
  return {
    g,
    upstream,
    token: await obtainToken(g.url, APP),
    ws: (path) => `${g.url.replace("http:", "ws:")}${path}`,
    lastHandshake: () => upstream.handshakes.at(-1) as IncomingMessage,
  };
}
