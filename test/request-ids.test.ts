/** Generated request ids (src/http/request-ids.ts). */
import t from "tap";
import { createRequestIds } from "../src/http/request-ids.js";

t.test("ids are 32 hex digits and do not repeat across pool refills", async (t) => {
  const newId = createRequestIds();
  const seen = new Set<string>();
  for (let i = 0; i < 1000; i++) seen.add(newId());
  t.equal(seen.size, 1000, "a thousand ids, four pool refills, no repeat");
  for (const id of seen) {
    if (!/^[0-9a-f]{32}$/.test(id)) t.fail(`malformed id ${id}`);
  }
  t.not(createRequestIds()(), createRequestIds()(), "generators do not share a sequence");
});
