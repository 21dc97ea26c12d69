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
  [undefined, "en", "absent"],
  ["", "en", "empty"],
  ["   ", "en", "only whitespace"],
  [",,,", "en", "only empty list elements"],
  ["fr-CA, fr;q=0.9, en;q=0.8", "fr", "region truncated by lookup"],
  ["de-DE-1996", "de", "truncation over two subtags"],
  ["EN-gb", "en", "upper-case language"],
  ["Fr", "fr", "mixed case"],
  ["*", "en", "star alone is the default"],
  ["ja, zh-Hant", "en", "nothing supported"],
  ["fr;q=0, de;q=0.5", "de", "q=0 excludes"],
  ["en;q=0, fr;q=0, de;q=0, es;q=0, it;q=0", "en", "every supported excluded: default"],
  ["fr;q=2", "en", "weight above 1"],
  ["fr;q=0.1234", "en", "four decimals"],
  ["fr;q=abc", "en", "not a number"],
  ["fr;q=-1", "en", "negative"],
  ["fr;q=", "en", "empty weight"],
  ["fr;q=2, de;q=0.3", "de", "a bad member is skipped, the rest count"],
  ["en_US", "en", "underscore read as hyphen (docs/language.md)"],
  ["fr_CA, de;q=0.9", "fr", "underscore in a region"],
  ["123", "en", "digits as language"],
  ["aaaaaaaaa", "en", "nine letters"],
  ["fran\u00e7ais", "en", "non-ASCII"],
  ["e n", "en", "space inside a tag"],
  ["fr, de", "fr", "two header lines as joined by Node"],
  [manyMembers, "en", "2,000 members: only the first 32 are read"],
  ["de", "de", "one exact tag"],
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

// Measured at most 2.4 reads per character, and 175 above 3 per character: what the (at most 32)
// lookups read while comparing a range with the five supported tags. A quadratic scan exceeds
// this bound from a few dozen characters on.
const READS_PER_CHARACTER = 3;
const READS_FOR_LOOKUPS = 8 * MAX_MEMBERS;

/** The most character reads a linear scan may make of a header `length` long. */
function linearBound(length: number): number {
  return READS_PER_CHARACTER * length + READS_FOR_LOOKUPS;
}

/**
 * A header that counts each character read. negotiateLanguage and the helpers it hands the header
 * to (skipOws, parseQValue, lookupRange) use only `length` and `charCodeAt`; any other string
 * method would throw on this object, so no read goes uncounted.
 */
function countingHeader(text: string): { readonly value: string; readonly reads: number } {
  let reads = 0;
  const value = {
    length: text.length,
    charCodeAt(index: number): number {
      reads++;
      return text.charCodeAt(index);
    },
  } as unknown as string;
  return {
    value,
    get reads() {
      return reads;
    },
  };
}

/** Negotiates `text` through a counting header: the flag, the meter and the reads made. */
function negotiateCounted(text: string): { flag: string; meter: WorkMeter; reads: number } {
  const meter: WorkMeter = { members: 0, lookups: 0 };
  const header = countingHeader(text);
  const flag = negotiateLanguage(header.value, table, meter);
  return { flag, meter, reads: header.reads };
}

/** A supported flag, at most 32 members, a lookup per member at most, reads linear in the length. */
function boundedWork(text: string): boolean {
  const { flag, meter, reads } = negotiateCounted(text);
  return (
    SUPPORTED.has(flag) &&
    meter.members <= MAX_MEMBERS &&
    meter.lookups <= meter.members &&
    reads <= linearBound(text.length)
  );
}

t.test("Accept-Language table: the flag for each header", async (t) => {
  t.ok(ACCEPT_LANGUAGE_CASES.length >= 40, "at least 40 inputs");
  for (const [header, expected, why] of ACCEPT_LANGUAGE_CASES) {
    t.equal(negotiateLanguage(header, table), expected, `${why}: ${JSON.stringify(header)}`);
  }
});

t.test("hostile header: the scan stops after 32 members", async (t) => {
  const meter: WorkMeter = { members: 0, lookups: 0 };
  const header = countingHeader(manyMembers);
  negotiateLanguage(header.value, table, meter);
  t.equal(meter.members, MAX_MEMBERS);
  t.equal(meter.lookups, MAX_MEMBERS);
  // The scan stops at member 33: what lies beyond it is never read.
  const reachable = manyMembers
    .split(", ")
    .slice(0, MAX_MEMBERS + 1)
    .join(", ").length;
  t.ok(
    header.reads <= linearBound(reachable),
    `${header.reads} reads for ${reachable} of ${manyMembers.length} characters`,
  );
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

t.test("a counting header gives the flag the plain string gives", async (t) => {
  for (const [header, expected, why] of ACCEPT_LANGUAGE_CASES) {
    if (header !== undefined) t.equal(negotiateCounted(header).flag, expected, why);
  }
});

t.test("property: any header gives a supported flag, never throws, linear reads", async (t) => {
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
  fc.assert(fc.property(header, boundedWork), { numRuns: 2000 });
  t.pass("2000 generated headers");
});

t.test("property: hostile long headers are read in linear time", async (t) => {
  // Each piece repeated up to 2,000 times: many members, long tags, many `-` subtags, long
  // q-values, long OWS, long junk before a comma, runs of empty list elements.
  const piece = fc.constantFrom(
    "fr, ",
    "xx,",
    "a;q=0.5,",
    "a",
    "Ab1",
    "a-",
    "fr-",
    "de_",
    "-",
    "fr;q=",
    "0",
    "1.",
    "0.5",
    ";",
    "q=",
    " ",
    "\t",
    ",",
    "*",
    "=",
    "de-AT-1996;q=0.5, ",
    "fr ;  q=0.123 ,",
  );
  const run = fc
    .tuple(piece, fc.integer({ min: 1, max: 2000 }))
    .map(([text, count]) => text.repeat(count));
  const header = fc.array(run, { minLength: 1, maxLength: 6 }).map((runs) => runs.join(""));
  fc.assert(fc.property(header, boundedWork), { numRuns: 300 });
  t.pass("300 long headers");
});
