/**
 * The contract gatehouse relies on in http-proxy-3's internals (src/upstream/http-proxy-internals.ts):
 * its web passes are a list of named functions that includes `deleteLength`. An upgrade that
 * changes this fails here by name, and at start, rather than silently reframing bodies.
 */
import { ProxyServer } from "http-proxy-3";
import t from "tap";
import { keepRequestFraming } from "../src/upstream/http-proxy-internals.js";

t.test("http-proxy-3's web passes are named functions, deleteLength among them", async (t) => {
  const passes = (new ProxyServer() as unknown as { webPasses: Array<{ name: string }> }).webPasses;
  t.ok(Array.isArray(passes));
  t.ok(
    passes.some((pass) => pass.name === "deleteLength"),
    "the pass gatehouse takes out",
  );
  t.ok(
    passes.some((pass) => pass.name === "stream"),
    "the pass that forwards, which stays",
  );
});

t.test(
  "keepRequestFraming takes out deleteLength alone, and refuses a list without it",
  async (t) => {
    const server = new ProxyServer();
    const before = (server as unknown as { webPasses: Array<{ name: string }> }).webPasses.map(
      (pass) => pass.name,
    );
    keepRequestFraming(server);
    const after = (server as unknown as { webPasses: Array<{ name: string }> }).webPasses.map(
      (pass) => pass.name,
    );
    t.strictSame(
      after,
      before.filter((name) => name !== "deleteLength"),
    );
    t.throws(() => keepRequestFraming(server), /no "deleteLength" web pass/);
  },
);
