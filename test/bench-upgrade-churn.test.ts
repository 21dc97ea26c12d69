import t from "tap";
import {
  longestFrom,
  openChurn,
  probe,
  statusCount,
  upgradeRequest,
} from "../bench/upgrade-churn.js";
import { anonymousOpenRoute, configFor, startTestGatehouse } from "./helpers/gatehouse.js";
import { startUpstream } from "./helpers/upstream.js";

const RESPONSES =
  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" +
  "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n" +
  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

// What a count found: "200×2 429×1".
function found(count: ReturnType<typeof statusCount>): string {
  return [...count.statuses]
    .sort(([a], [b]) => a - b)
    .map(([status, n]) => `${status}×${n}`)
    .join(" ");
}

t.test("the status count finds every response, wherever the bytes are cut", async (t) => {
  const cuts = Array.from({ length: RESPONSES.length + 1 }, (_, cut) => cut);
  const counted = cuts.map((cut) => {
    const count = statusCount();
    count.feed(RESPONSES.slice(0, cut));
    count.feed(RESPONSES.slice(cut));
    return `${count.total()}: ${found(count)}`;
  });
  t.same(
    counted,
    cuts.map(() => "3: 200×2 429×1"),
    "cut in two at every byte",
  );
  const byteByByte = statusCount();
  for (const byte of RESPONSES) byteByByte.feed(byte);
  t.equal(`${byteByByte.total()}: ${found(byteByByte)}`, "3: 200×2 429×1", "one byte at a time");
});

t.test("the longest wait counts only the probes answered from the given moment", async (t) => {
  const probes = [
    { sent: 0, answered: 40, status: 200 },
    { sent: 40, answered: 45, status: 200 },
    { sent: 45, answered: 75, status: 0 },
  ];
  t.equal(longestFrom(probes, 44), 30, "one still in flight at the moment counts whole");
  t.equal(longestFrom(probes, 0), 40);
  t.equal(longestFrom(probes, 76), 0, "none answered after");
});

t.test(
  "every request of the churn connection is served as plain HTTP on that one connection",
  async (t) => {
    const upstream = await startUpstream();
    const gh = await startTestGatehouse(
      configFor(upstream.url, `plans:\n${anonymousOpenRoute(1_000_000)}`),
    );
    t.teardown(async () => {
      await gh.close();
      await upstream.close();
    });
    t.match(upgradeRequest("/open"), /\r\nUpgrade: h2c\r\n/);

    const churn = await openChurn(gh.port, "/open");
    // Two whole batches and part of a third.
    await churn.send(250);
    t.equal(churn.answers.total(), 250);
    t.same([...churn.answers.statuses], [[200, 250]], "every one answered 200");
    const forwarded = upstream.received.filter((one) => one.url === "/open");
    t.equal(forwarded.length, 250, "each reached the upstream once");
    t.notOk(
      forwarded.some((one) => "upgrade" in one.headers),
      "as plain HTTP: no Upgrade went on",
    );

    let closed = Number.POSITIVE_INFINITY;
    const probes = await probe(
      gh.port,
      "/healthz",
      (async () => {
        closed = performance.now();
        await churn.close();
      })(),
    );
    t.ok(probes.length > 0, "probes were sent");
    t.ok(
      probes.every((one) => one.status === 200),
      "every probe answered 200",
    );
    t.ok(
      probes.some((one) => one.answered >= closed),
      "probing went on at least until the close began",
    );
  },
);
