// The Redis store's batches as the script pipe writes them: the encoding kept per subject gives
// the bytes the arguments themselves encode to, whatever the prefix, subject, counters, cost and
// time, and what it keeps stays bounded.
import t from "tap";
import type { Slot } from "../src/limits/counters.js";
import { createBatchEncoder, KEPT_SUBJECTS, scriptArgs } from "../src/limits/redis-store.js";
import { scriptCall } from "../src/limits/resp.js";

const RATES: readonly Slot[] = Object.freeze([
  { name: "rate:plan:standard:burst:1000", limit: 10, ttlMs: 1000 },
  { name: "rate:plan:standard:minute:60000", limit: 600, ttlMs: 60_000 },
]);
const WITH_QUOTA: readonly Slot[] = Object.freeze([
  ...RATES,
  {
    name: "quota:plan:standard@2026-11",
    limit: 1_000_000,
    ttlMs: 2_592_000_000,
    endsAt: 1_798_761_600_000,
  },
]);

const CASES = [
  { prefix: "gatehouse:", subject: "client:acme", slots: RATES, cost: 1, force: false },
  { prefix: "gatehouse:", subject: "client:acme", slots: WITH_QUOTA, cost: 5, force: true },
  { prefix: "gh:", subject: "ip:2001:db8::1", slots: RATES, cost: 0, force: false },
  { prefix: "gh:", subject: "client:partner:svc-1", slots: WITH_QUOTA, cost: -3, force: true },
  { prefix: "préfixe-漢字:", subject: "client:acme", slots: WITH_QUOTA, cost: 1, force: false },
];

t.test("a batch encodes as its arguments do, the kept parts and the fresh alike", async (t) => {
  const nowMs = 1_795_000_123_456;
  for (const { prefix, subject, slots, cost, force } of CASES) {
    const encode = createBatchEncoder(prefix);
    for (const at of [nowMs, nowMs + 250, nowMs + 86_400_000]) {
      const batch = { subject, slots, cost, force, nowMs: at };
      const call = encode(batch);
      const expected = scriptCall(scriptArgs(prefix, batch));
      const what = `${prefix} ${subject} ${slots.length} cost ${cost} at +${at - nowMs}`;
      t.equal(call.encoded, expected.encoded, what);
      t.equal(call.count, expected.count, `${what}: count`);
      t.equal(call.ascii, expected.ascii, `${what}: ascii`);
      t.equal(call.key, expected.key, `${what}: first key`);
      t.strictSame(call.args(), expected.args(), `${what}: arguments`);
    }
  }
});

t.test("a subject encoded again once the kept set has started over is still right", async (t) => {
  const encode = createBatchEncoder("gh:");
  const nowMs = 1_795_000_000_000;
  for (let i = 0; i <= KEPT_SUBJECTS + 10; i++)
    encode({ subject: `ip:10.0.${i >> 8}.${i & 255}`, slots: RATES, cost: 1, force: false, nowMs });
  // After the set started again, an early subject is encoded anew, and still right.
  const batch = { subject: "ip:10.0.0.0", slots: RATES, cost: 1, force: false, nowMs };
  t.equal(encode(batch).encoded, scriptCall(scriptArgs("gh:", batch)).encoded);
});
