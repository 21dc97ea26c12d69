/**
 * An X-Forwarded-For hop is read as the address it names, with or without a port: proxies such
 * as Azure Application Gateway write `IP:port`, and RFC 7239 §6 writes `[IPv6]:port`.
 */
import t from "tap";
import { hopAddress } from "../src/http/client-ip.js";

t.test("each spelling of a hop and the address it names", async (t) => {
  const cases: ReadonlyArray<readonly [string, string | undefined]> = [
    ["203.0.113.7", "203.0.113.7"],
    ["203.0.113.7:8080", "203.0.113.7"],
    ["203.0.113.7:0", "203.0.113.7"],
    ["2001:db8::1", "2001:db8::1"],
    ["[2001:db8::1]", "2001:db8::1"],
    ["[2001:db8::1]:443", "2001:db8::1"],
    ["::ffff:203.0.113.7", "203.0.113.7"],
    ["[::ffff:203.0.113.7]:443", "203.0.113.7"],
    ["203.0.113.7:", undefined],
    ["203.0.113.7:123456", undefined],
    ["203.0.113.7:http", undefined],
    ["203.0.113.700:80", undefined],
    ["[2001:db8::1", undefined],
    ["[2001:db8::1]443", undefined],
    ["[2001:db8::1]:", undefined],
    ["[203.0.113.7]:80", undefined],
    ["[]:80", undefined],
    ["unknown", undefined],
    ["example.com:80", undefined],
    ["", undefined],
  ];
  for (const [hop, address] of cases) t.equal(hopAddress(hop), address, JSON.stringify(hop));
});
