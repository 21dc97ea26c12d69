import fc from "fast-check";
import t from "tap";
import {
  MAX_MEMBERS,
  negotiateLanguage,
  parseQValue,
  type WorkMeter,
} from "../src/language/accept-language.js";
import { compileLanguages, lookupRange } from "../src/language/table.js";

const translation = {
  parameter: "translation_language",
  max: 5,
  on_unsupported: "reject",
  forward_as: "comma",
} as const;
const { table } = compileLanguages({
  supported: ["en", "fr", "de", "es", "it"],
  default: "en",
  translation,
});
const SUPPORTED = new Set(table.supported);

const manyMembers = Array.from({ length: 2000 }, (_, i) => `x${String.fromCharCode(97 + (i % 26))}`)
  .join(", ")
  .concat(", fr");

// [header (undefined: absent), the flag the upstream receives, why]
const ACCEPT_LANGUAGE_CASES: Array<[string | undefined, string, string]> = [
  [undefined, "en", "C1 absent"],
  ["", "en", "C1 empty"],
  ["   ", "en", "only whitespace"],
  [",,,", "en", "only empty list elements"],
  ["fr-CA, fr;q=0.9, en;q=0.8", "fr", "C2 region truncated by lookup"],
  ["de-DE-1996", "de", "C3 truncation over two subtags"],
  ["EN-gb", "en", "C4 upper-case language"],
  ["Fr", "fr", "C4 mixed case"],
  ["*", "en", "C5 star alone is the default"],
  ["ja, zh-Hant", "en", "C6 nothing supported"],
  ["fr;q=0, de;q=0.5", "de", "C7 q=0 excludes"],
  ["en;q=0, fr;q=0, de;q=0, es;q=0, it;q=0", "en", "C8 every supported excluded: default"],
  ["fr;q=2", "en", "C9 weight above 1"],
  ["fr;q=0.1234", "en", "C9 four decimals"],
  ["fr;q=abc", "en", "C9 not a number"],
  ["fr;q=-1", "en", "C9 negative"],
  ["fr;q=", "en", "C9 empty weight"],
  ["fr;q=2, de;q=0.3", "de", "C9 a bad member is skipped, the rest count"],
  ["en_US", "en", "C10 underscore read as hyphen (SPEC §6)"],
  ["fr_CA, de;q=0.9", "fr", "underscore in a region"],
  ["123", "en", "C10 digits as language"],
  ["aaaaaaaaa", "en", "C10 nine letters"],
  ["fran\u00e7ais", "en", "C10 non-ASCII"],
  ["e n", "en", "C10 space inside a tag"],
  ["fr, de", "fr", "C11 two header lines as joined by Node"],
  [manyMembers, "en", "C12 2,000 members: only the first 32 are read"],
  ["de", "de", "C13 one exact tag"],
  ["*, fr;q=0.5", "fr", "star beside other ranges is skipped"],
  ["fr;q=0.5, *", "fr", "star after a range is skipped"],
  ["es;q=0.2, it;q=0.8", "it", "highest weight wins regardless of order"],
  ["es;q=0.5, it;q=0.5", "es", "equal weights: the first wins"],
  ["it;Q=0.5, de;q=0.4", "it", "Q is case-insensitive"],
  ["fr ; q=0.5 , de;q=0.4", "fr", "OWS around the semicolon"],
  ["fr;q= 0.5, de;q=0.4", "de", "space after = is not the grammar"],
  ["fr;q=1.000, de", "fr", "q=1.000 is valid"],
  ["fr;q=1.001, de;q=0.1", "de", "q above 1 by a thousandth"],
  ["fr;q=0., de;q=0.1", "de", "q=0. is zero: fr excluded"],
  ["fr;q=0.001, de;q=0", "fr", "the smallest positive weight still counts"],
  ["fr;level=1, de;q=0.1", "de", "a parameter other than q"],
  ["fr-CA;q=0, fr;q=0.5", "fr", "q=0 on a longer range does not exclude its prefix"],
  ["fr;q=0, fr-CA", "en", "q=0 on the supported tag excludes it for longer ranges too"],
  ["fr-CA;q=0.9, fr;q=0", "en", "excluded even when the exclusion comes later"],
  ["zh-Hant-TW, it;q=0.1", "it", "unsupported ranges are passed over"],
  ["en-x-private", "en", "private-use singleton removed by truncation"],
  ["de-", "en", "trailing hyphen"],
  ["-de", "en", "leading hyphen"],
  ["de--at", "en", "empty subtag"],
  ["de-abcdefghi", "en", "subtag of nine characters"],
  ["de-AT-1901-x-y", "de", "many subtags"],
  ["fr-1234", "fr", "digits allowed after the first subtag"],
  ["fr;;q=0.5, de;q=0.1", "de", "doubled semicolon"],
  ["fr;q=0.5;q=0.9, es;q=0.1", "es", "two weights"],
  ["fr\r\n", "en", "a control character in the member"],
  ["\u0000de", "en", "NUL before a tag"],
  ["xx, yy, zz, de;q=0.1", "de", "unsupported first, supported later"],
  [`${"xx, ".repeat(MAX_MEMBERS - 1)}de`, "de", "member 32 is read"],
  [`${"xx, ".repeat(MAX_MEMBERS)}de`, "en", "member 33 is not read"],
  [`${",".repeat(100)}de`, "de", "empty elements are not members"],
];

t.test("Accept-Language table: the flag for each header", async (t) => {
  t.ok(ACCEPT_LANGUAGE_CASES.length >= 40, "at least 40 inputs");
  for (const [header, expected, why] of ACCEPT_LANGUAGE_CASES) {
    t.equal(negotiateLanguage(header, table), expected, `${why}: ${JSON.stringify(header)}`);
  }
});

t.test("C12 hostile header: the scan stops after 32 members", async (t) => {
  const meter: WorkMeter = { members: 0, scanned: 0, lookups: 0 };
  negotiateLanguage(manyMembers, table, meter);
  t.equal(meter.members, MAX_MEMBERS);
  t.ok(meter.scanned < 200, `scanned ${meter.scanned} of ${manyMembers.length} characters`);
  t.equal(meter.lookups, MAX_MEMBERS);
});

t.test("another default and another supported list", async (t) => {
  const other = compileLanguages({ supported: ["de", "fr", "gsw"], default: "de", translation });
  t.equal(negotiateLanguage("gsw-CH", other.table), "gsw", "three-letter tag");
  t.equal(negotiateLanguage("en", other.table), "de", "unmatched: this default");
  t.equal(negotiateLanguage("*", other.table), "de", "star: this default");
});

t.test("q-values (RFC 9110 §12.4.2)", async (t) => {
  const cases: Array<[string, number]> = [
    ["0", 0],
    ["1", 1000],
    ["0.5", 500],
    ["0.25", 250],
    ["0.125", 125],
    ["1.0", 1000],
    ["1.", 1000],
    ["0.", 0],
    ["1.1", -1],
    ["0.1234", -1],
    ["2", -1],
    [".5", -1],
    ["", -1],
    ["0x5", -1],
  ];
  for (const [text, expected] of cases) {
    t.equal(parseQValue(text, 0, text.length), expected, JSON.stringify(text));
  }
});

t.test("RFC 4647 §3.4 lookup on the supported table", async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ["fr", "fr"],
    ["FR-ca", "fr"],
    ["de_AT", "de"],
    ["deu", undefined],
    ["d", undefined],
    ["zh-Hant", undefined],
  ];
  for (const [range, expected] of cases) {
    const found = lookupRange(range, 0, range.length, table);
    t.equal(found < 0 ? undefined : table.supported[found], expected, range);
  }
});

t.test("property: any header gives a supported flag, never throws, bounded work", async (t) => {
  const headerChars = fc.constantFrom(..."abcdefrnitsxzAEFR-_*;=q.01,9 \t\u00e7\u0000".split(""));
  const header = fc.oneof(
    fc.string({ unit: headerChars, maxLength: 400 }),
    fc.string({ maxLength: 400 }),
    fc
      .array(
        fc.tuple(
          fc.constantFrom("fr", "de-AT", "EN", "xx", "*", "es-419", "it_CH", "zh-Hant"),
          fc.option(fc.constantFrom("0", "0.5", "1", "1.000", "0.123", "2", "abc")),
        ),
        { maxLength: 60 },
      )
      .map((members) => members.map(([tag, q]) => (q === null ? tag : `${tag};q=${q}`)).join(", ")),
  );
  fc.assert(
    fc.property(header, (value) => {
      const meter: WorkMeter = { members: 0, scanned: 0, lookups: 0 };
      const flag = negotiateLanguage(value, table, meter);
      return (
        SUPPORTED.has(flag) &&
        meter.members <= MAX_MEMBERS &&
        meter.scanned <= value.length &&
        meter.lookups <= meter.members
      );
    }),
    { numRuns: 2000 },
  );
  t.pass("2000 generated headers");
});

t.test("property: the scan of a long header is bounded by its length and 32 members", async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5000 }),
      fc.constantFrom("fr", "x", ",", "a;q=0.5,"),
      (count, unit) => {
        const value = unit.repeat(count);
        const meter: WorkMeter = { members: 0, scanned: 0, lookups: 0 };
        negotiateLanguage(value, table, meter);
        return meter.scanned <= value.length && meter.members <= MAX_MEMBERS;
      },
    ),
    { numRuns: 200 },
  );
  t.pass("200 long headers");
});
