/**
 * gatehouse loads undici's Pool, Client and connector from their own modules rather than from
 * undici's entry point (src/upstream/undici.ts says why): they must be the very classes the
 * entry point exports, on this undici and this Node.
 */
import t from "tap";
import * as undici from "undici";
import { buildConnector, Client, Pool } from "../src/upstream/undici.js";

t.test("the modules gatehouse loads are undici's public Pool, Client and buildConnector", (t) => {
  t.equal(Pool, undici.Pool);
  t.equal(Client, undici.Client);
  t.equal(buildConnector, undici.buildConnector);
  t.end();
});
