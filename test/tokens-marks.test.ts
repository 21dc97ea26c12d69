/**
 * The process's record of used assertion ids, revoked tokens and used DPoP proof ids: each client
 * holds at most so many still in force (proof ids whatever keys signed them), refused beyond
 * rather than forgetting one, and an id's place is given back when it ends.
 */
import t from "tap";
import { createLocalMarks, createTokenMarks, MAX_PROOFS_PER_CLIENT } from "../src/tokens/marks.js";
import { PROOF_RULES } from "../src/tokens/dpop-proof.js";
import { manualClock } from "./helpers/clock.js";

const HOUR = 3_600_000;

function memoryMarks(most: { assertions: number; revocations: number; proofs?: number }) {
  const clock = manualClock(Date.UTC(2026, 0, 5, 12));
  const local = createLocalMarks(() => clock.monotonic(), clock, { proofs: 100, ...most });
  const failed: unknown[] = [];
  const outage = { policy: "closed" as const, passes: () => false };
  const marks = createTokenMarks(undefined, local, outage, { failed: (e) => failed.push(e) });
  return { clock, local, marks, failed };
}

t.test("revocations: at most so many per client, each place given back when it ends", async (t) => {
  const { clock, local, marks } = memoryMarks({ assertions: 10, revocations: 3 });
  t.teardown(() => local.close());
  const now = () => clock.monotonic();
  t.equal(await marks.revoke("app", "a", now() + HOUR, now()), "revoked");
  t.equal(await marks.revoke("app", "b", now() + 2 * HOUR, now()), "revoked");
  t.equal(await marks.revoke("app", "c", now() + 2 * HOUR, now()), "revoked");
  t.equal(await marks.revoke("app", "d", now() + 2 * HOUR, now()), "full", "a fourth is refused");
  t.equal(marks.isRevoked("app", "d", now()), false, "and the token stays good");
  t.equal(await marks.revoke("app", "a", now() + HOUR, now()), "revoked", "one it holds again");
  t.equal(await marks.revoke("other", "x", now() + HOUR, now()), "revoked", "another client");

  clock.advance(HOUR);
  t.equal(marks.isRevoked("app", "a", now()), false, "a's token has expired");
  t.equal(await marks.revoke("app", "d", now() + HOUR, now()), "revoked", "a's place is free");
  t.equal(marks.isRevoked("app", "d", now()), true);
  t.equal(await marks.revoke("app", "e", now() + HOUR, now()), "full");
});

t.test("assertions: a replay is told from a full share", async (t) => {
  const { clock, local, marks } = memoryMarks({ assertions: 2, revocations: 10 });
  t.teardown(() => local.close());
  const now = () => clock.monotonic();
  t.equal(await marks.firstUse("batch", "j1", now() + 60_000, now()), "first");
  t.equal(await marks.firstUse("batch", "j1", now() + 60_000, now()), "replayed");
  t.equal(await marks.firstUse("batch", "j2", now() + 120_000, now()), "first");
  t.equal(await marks.firstUse("batch", "j3", now() + 60_000, now()), "full");
  clock.advance(60_000);
  t.equal(await marks.firstUse("batch", "j3", now() + 60_000, now()), "first", "j1 ended");
  t.equal(await marks.firstUse("batch", "j1", now() + 60_000, now()), "full", "j2 and j3 held");
});

t.test(
  "DPoP proofs: held per client, whatever its keys, a replay told from a full share",
  async (t) => {
    const { clock, local, marks } = memoryMarks({ assertions: 10, revocations: 10, proofs: 2 });
    t.teardown(() => local.close());
    const now = () => clock.monotonic();
    const proof = (client: string, key: string, jti: string, forMs = 60_000) =>
      marks.firstProof(client, key, jti, now() + forMs, now());
    t.equal(await proof("app", "key-a", "p1"), "first");
    t.equal(await proof("app", "key-a", "p1"), "replayed");
    t.equal(await proof("app", "key-a", "p2", 120_000), "first");
    t.equal(await proof("app", "key-b", "p3"), "full", "another key of the same client");
    t.equal(await proof("other app", "key-b", "p3"), "first", "another client, its id spaced");
    t.equal(await proof("other app", "key-a", "p1"), "first", "its own share");
    t.equal(await marks.firstUse("app", "p3", now() + 60_000, now()), "first", "not an assertion");
    clock.advance(60_000);
    t.equal(await proof("app", "key-c", "p3"), "first", "p1 ended");
    t.equal(await proof("app", "key-a", "p1"), "full", "p2 and p3 held");
    t.strictSame(
      local
        .save(now())
        .proofs.map(({ client, id }) => `${client}|${id}`)
        .sort(),
      ["app|key-a p2", "app|key-c p3"],
      "saved per client, each id with its key",
    );
  },
);

t.test("an id added again after it ended, before the sweep, is counted once", async (t) => {
  const { clock, local, marks } = memoryMarks({ assertions: 1, revocations: 1 });
  t.teardown(() => local.close());
  const now = () => clock.monotonic();
  t.equal(await marks.revoke("app", "a", now() + 1000, now()), "revoked");
  // Ended, not yet swept (the sweep runs each second): revoked again with a later end.
  const ended = now() + 1000;
  t.equal(await marks.revoke("app", "a", ended + 5000, ended), "revoked");
  clock.advance(7000);
  t.equal(await marks.revoke("app", "b", now() + 1000, now()), "revoked", "its place came back");
});

t.test("a full client's refusal names the number of proof ids a client holds", async (t) => {
  t.match(PROOF_RULES.full, `(at most ${MAX_PROOFS_PER_CLIENT})`);
});
