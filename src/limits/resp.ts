/**
 * The Redis protocol (RESP2, https://redis.io/docs/latest/develop/reference/protocol-spec/) as
 * far as the script pipe needs it: a command written as an array of bulk strings, and the replies
 * read back one after another from a byte stream, however the stream splits them.
 */

/** An error reply (`-ERR ...`, `-NOSCRIPT ...`, `-MOVED ...`): Redis refused the command. */
export class ReplyError extends Error {
  override readonly name = "ReplyError";
}

/** One reply: an integer, a simple or bulk string, a null, an error, or an array of replies. */
export type Reply = number | string | null | ReplyError | Reply[];

/** One argument as a RESP bulk string: its length in bytes, then itself. */
export function bulk(part: string | number): string {
  // A number's decimal digits are ASCII: a character per byte.
  if (typeof part === "number") {
    const digits = String(part);
    return `$${digits.length}\r\n${digits}\r\n`;
  }
  return `$${Buffer.byteLength(part)}\r\n${part}\r\n`;
}

/** The bytes of the command `head` followed by `tail`, as a string to write in UTF-8. */
export function encodeCommand(
  head: readonly string[],
  tail: ReadonlyArray<string | number> = [],
): string {
  let out = `*${head.length + tail.length}\r\n`;
  for (const part of head) out += bulk(part);
  for (const part of tail) out += bulk(part);
  return out;
}

/** Whether `text` is ASCII, so that it can be written a byte per character. */
export function isAscii(text: string): boolean {
  // UTF-8 writes every character beyond ASCII in more than one byte.
  return Buffer.byteLength(text) === text.length;
}

/**
 * A script call's arguments (the number of keys, the keys, then ARGV), encoded for the wire by
 * whoever makes the call, who may keep the parts that repeat from call to call.
 */
export interface ScriptCall {
  /** How many arguments there are. */
  readonly count: number;
  /** The arguments as RESP bulk strings, one after another. */
  readonly encoded: string;
  /** Whether `encoded` is ASCII. */
  readonly ascii: boolean;
  /** The first key: a Cluster runs the call where it lives. */
  readonly key: string;
  /** The arguments themselves, for a client that encodes its own. */
  args(): ReadonlyArray<string | number>;
}

/** The call with the arguments `list`: the number of keys, the keys, then ARGV. */
export function scriptCall(list: ReadonlyArray<string | number>): ScriptCall {
  let encoded = "";
  for (const part of list) encoded += bulk(part);
  return {
    count: list.length,
    encoded,
    ascii: isAscii(encoded),
    key: String(list[1]),
    args: () => list,
  };
}

/** The stream does not hold the whole reply yet. */
const INCOMPLETE = Symbol("incomplete");

const CR = 13;
const PLUS = 43;
const MINUS = 45;
const COLON = 58;
const DOLLAR = 36;
const STAR = 42;

/** Thrown for bytes that are not RESP2: the connection cannot be trusted any further. */
export class ProtocolError extends Error {
  override readonly name = "ProtocolError";
}

/** Reads the replies in a byte stream, in order, and hands each to `onReply`. */
export class ReplyReader {
  #rest: Buffer | undefined;
  // Where the reply that `#parse` last read ends.
  #end = 0;
  #reset = false;

  constructor(private readonly onReply: (reply: Reply) => void) {}

  /** Reads what `chunk` completes; keeps an unfinished reply for the next chunk. */
  feed(chunk: Buffer): void {
    const data = this.#rest === undefined ? chunk : Buffer.concat([this.#rest, chunk]);
    this.#rest = undefined;
    this.#reset = false;
    let at = 0;
    while (at < data.length) {
      const reply = this.#parse(data, at);
      if (reply === INCOMPLETE) break;
      at = this.#end;
      this.onReply(reply);
      // `onReply` gave up on the connection: the rest of its bytes mean nothing.
      if (this.#reset) return;
    }
    if (at < data.length) this.#rest = data.subarray(at);
  }

  /** Forgets what is left of the stream (the connection it came on is gone). */
  reset(): void {
    this.#rest = undefined;
    this.#reset = true;
  }

  #parse(data: Buffer, at: number): Reply | typeof INCOMPLETE {
    const lineEnd = data.indexOf(CR, at + 1);
    if (lineEnd === -1 || lineEnd + 1 >= data.length) return INCOMPLETE;
    const next = lineEnd + 2;
    switch (data[at]) {
      case COLON:
        this.#end = next;
        return integer(data, at + 1, lineEnd);
      case PLUS:
        this.#end = next;
        return data.toString("utf8", at + 1, lineEnd);
      case MINUS:
        this.#end = next;
        return new ReplyError(data.toString("utf8", at + 1, lineEnd));
      case DOLLAR: {
        const length = integer(data, at + 1, lineEnd);
        if (length < 0) {
          this.#end = next;
          return null;
        }
        if (next + length + 2 > data.length) return INCOMPLETE;
        this.#end = next + length + 2;
        return data.toString("utf8", next, next + length);
      }
      case STAR: {
        const count = integer(data, at + 1, lineEnd);
        if (count < 0) {
          this.#end = next;
          return null;
        }
        const items: Reply[] = [];
        let from = next;
        for (let i = 0; i < count; i++) {
          const item = this.#parse(data, from);
          if (item === INCOMPLETE) return INCOMPLETE;
          items.push(item);
          from = this.#end;
        }
        this.#end = from;
        return items;
      }
      default:
        throw new ProtocolError(`unexpected reply type byte ${String(data[at])}`);
    }
  }
}

/** The decimal integer in `data` from `start` to `end`. */
function integer(data: Buffer, start: number, end: number): number {
  const negative = data[start] === MINUS;
  let value = 0;
  for (let i = negative ? start + 1 : start; i < end; i++) {
    const digit = (data[i] as number) - 48;
    if (digit < 0 || digit > 9) throw new ProtocolError("a malformed integer");
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}
