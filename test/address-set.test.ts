/**
 * The trusted proxies' address set answers as Node's BlockList does, for IPv4 and IPv6 alike,
 * and reads IPv4 text exactly as Node's isIPv4 accepts it.
 */
import { BlockList, isIPv4 } from "node:net";
import fc from "fast-check";
import t from "tap";
import { addressSet, parseIPv4 } from "../src/http/address-set.js";

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.tuple(octet, octet, octet, octet).map((parts) => parts.join("."));
// Mostly in 10/8 and 192.0.2/24, so that entries and addresses meet often.
const nearby = fc.oneof(
  ipv4,
  fc.tuple(octet, octet).map(([a, b]) => `10.${a}.${b}.1`),
  octet.map((a) => `192.0.2.${a}`),
);
const ipv4Entry = fc.oneof(
  nearby,
  fc.tuple(nearby, fc.integer({ min: 0, max: 32 })).map(([a, bits]) => `${a}/${bits}`),
);
const ipv6Entry = fc.oneof(
  fc.constantFrom("2001:db8::/32", "fd00::/8", "::1", "2001:db8:1::/48", "::/0"),
  fc.ipV6(),
);
const ipv6 = fc.oneof(fc.ipV6(), fc.constantFrom("2001:db8::7", "fd00::1", "::1", "2001:db9::1"));

function blockList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = "", bits] = entry.split("/");
    const type = isIPv4(address) ? "ipv4" : "ipv6";
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

t.test("IPv4 text is read as Node's isIPv4 accepts it", async (t) => {
  const texts = ["1.2.3.4", "0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3"];
  texts.push(
    "1.2.3.4.5",
    "1..2.3",
    "1.2.3.",
    "",
    "a.b.c.d",
    "1.2.3.4 ",
    "::ffff:1.2.3.4",
    "00.0.0.0",
  );
  for (const text of texts) t.equal(parseIPv4(text) !== -1, isIPv4(text), JSON.stringify(text));
  fc.assert(
    fc.property(
      fc.stringMatching(/^[0-9.]{0,16}$/),
      (text) => (parseIPv4(text) !== -1) === isIPv4(text),
    ),
  );
  t.equal(parseIPv4("203.0.113.7"), ((203 * 256 + 0) * 256 + 113) * 256 + 7);
});

t.test("membership is BlockList's, IPv4 and IPv6", async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(ipv4Entry, ipv6Entry), { minLength: 1, maxLength: 6 }),
      fc.array(fc.oneof(nearby, ipv6), { minLength: 1, maxLength: 20 }),
      (entries, addresses) => {
        const ours = addressSet(entries);
        const nodes = blockList(entries);
        return addresses.every(
          (address) =>
            ours.has(address) === nodes.check(address, isIPv4(address) ? "ipv4" : "ipv6"),
        );
      },
    ),
    { numRuns: 500 },
  );
  const set = addressSet(["10.0.0.0/8", "192.0.2.1", "2001:db8::/32"]);
  t.ok(set.has("10.1.2.3"));
  t.notOk(set.has("11.0.0.1"));
  t.ok(set.has("192.0.2.1"));
  t.notOk(set.has("192.0.2.2"));
  t.ok(set.has("2001:db8::7"));
  t.notOk(set.has("2001:db9::7"));
  t.notOk(set.has("not an address"));
});
