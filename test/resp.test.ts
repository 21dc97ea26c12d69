// The Redis protocol codec of the script pipe: commands as arrays of bulk strings, and replies
// read back in order however the byte stream is split, with a stream that is not RESP refused.
import fc from "fast-check";
import t from "tap";
import {
  encodeCommand,
  ProtocolError,
  ReplyError,
  ReplyReader,
  type Reply,
} from "../src/limits/resp.js";

// The wire form of a reply, written independently of the reader.
function wire(reply: Reply): string {
  if (reply === null) return "$-1\r\n";
  if (typeof reply === "number") return `:${reply}\r\n`;
  if (typeof reply === "string") return `$${Buffer.byteLength(reply)}\r\n${reply}\r\n`;
  if (reply instanceof ReplyError) return `-${reply.message}\r\n`;
  return `*${reply.length}\r\n${reply.map(wire).join("")}`;
}

// Replies made comparable with strictSame (an error by its message).
const plain = (reply: Reply): unknown =>
  reply instanceof ReplyError
    ? { error: reply.message }
    : Array.isArray(reply)
      ? reply.map(plain)
      : reply;

function readAll(chunks: readonly Buffer[]): Reply[] {
  const replies: Reply[] = [];
  const reader = new ReplyReader((reply) => replies.push(reply));
  for (const chunk of chunks) reader.feed(chunk);
  return replies;
}

const SAMPLE: Reply[] = [
  0,
  -42,
  9007199254740991,
  "",
  "OK",
  "a bulk string with\r\nCR LF inside",
  "é 漢字 🚦",
  null,
  new ReplyError("NOSCRIPT No matching script. Please use EVAL."),
  [],
  [1, [2, "three", null], new ReplyError("ERR inside")],
];

t.test("a command is an array of bulk strings with byte lengths", async (t) => {
  t.equal(encodeCommand(["PING"]), "*1\r\n$4\r\nPING\r\n");
  t.equal(
    encodeCommand(["EVALSHA", "abc"], [1, "k{é}", -2]),
    "*5\r\n$7\r\nEVALSHA\r\n$3\r\nabc\r\n$1\r\n1\r\n$5\r\nk{é}\r\n$2\r\n-2\r\n",
  );
});

t.test("replies are read in order at every split of the stream", async (t) => {
  const bytes = Buffer.from(SAMPLE.map(wire).join(""));
  const expected = SAMPLE.map(plain);
  t.strictSame(readAll([bytes]).map(plain), expected, "in one chunk");
  t.strictSame(
    readAll([...bytes].map((byte) => Buffer.from([byte]))).map(plain),
    expected,
    "a byte at a time",
  );
  for (let cut = 1; cut < bytes.length; cut++) {
    const read = readAll([bytes.subarray(0, cut), bytes.subarray(cut)]).map(plain);
    if (JSON.stringify(read) !== JSON.stringify(expected)) t.fail(`split at byte ${cut}`);
  }
});

t.test("a simple string reply is read as a string", async (t) => {
  t.strictSame(readAll([Buffer.from("+PONG\r\n+OK\r\n")]), ["PONG", "OK"]);
  t.strictSame(readAll([Buffer.from("*-1\r\n")]), [null], "a null array");
});

t.test("random replies, randomly split, read back the same", async (t) => {
  const leaf = fc.oneof(
    fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }),
    fc.string({ unit: "grapheme" }),
    fc.constant(null),
    fc
      .string({ unit: "grapheme-ascii" })
      .filter((text) => !/[\r\n]/.test(text))
      .map((text) => new ReplyError(text)),
  );
  const reply = fc.letrec<{ reply: Reply }>((tie) => ({
    reply: fc.oneof({ depthSize: "small" }, leaf, fc.array(tie("reply"), { maxLength: 5 })),
  })).reply;
  fc.assert(
    fc.property(
      fc.array(reply, { minLength: 1, maxLength: 8 }),
      fc.array(fc.nat()),
      (replies, cuts) => {
        const bytes = Buffer.from(replies.map(wire).join(""));
        const at = [...new Set(cuts.map((cut) => cut % bytes.length))].sort((a, b) => a - b);
        const chunks = [0, ...at].map((from, i) => bytes.subarray(from, at[i] ?? bytes.length));
        const read = readAll(chunks.filter((chunk) => chunk.length > 0));
        return JSON.stringify(read.map(plain)) === JSON.stringify(replies.map(plain));
      },
    ),
    { numRuns: 300 },
  );
  t.pass("300 random streams read back");
});

t.test("bytes that are not RESP are refused", async (t) => {
  t.throws(() => readAll([Buffer.from("HTTP/1.1 400 Bad Request\r\n")]), ProtocolError);
  t.throws(() => readAll([Buffer.from(":12x\r\n")]), ProtocolError, "a malformed integer");
});

t.test("a reset in the middle of a chunk drops the rest of the stream", async (t) => {
  const replies: Reply[] = [];
  const reader = new ReplyReader((reply) => {
    replies.push(reply);
    if (reply === 1) reader.reset();
  });
  reader.feed(Buffer.from(":1\r\n:2\r\n$5\r\nhel"));
  reader.feed(Buffer.from(":3\r\n"));
  t.strictSame(replies, [1, 3], "neither the reply after the reset nor its unfinished one");
});
