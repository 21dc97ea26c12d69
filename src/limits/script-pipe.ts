/**
 * A pipe for one Lua script to one Redis server: a connection of its own that writes the script
 * calls of every request read in one turn of the event loop in a single socket write, and matches
 * the replies back in order. It costs a request a fraction of what a general client's command
 * objects, per-command timers and promise chains do, which on the request path is most of what
 * counting in Redis costs.
 *
 * The pipe does not find Redis: its owner tells it where the server is (`open`) and when the
 * server is gone (`close`), and uses another client while the pipe is not `ready`. A call that
 * reached the server and got no answer in time, or whose connection closed, fails and is never
 * sent again; a call Redis answered with an error was not run, and the error says so.
 */
import { createHash } from "node:crypto";
import { connect as connectTcp, type Socket } from "node:net";
import { connect as connectTls, type ConnectionOptions } from "node:tls";
import type { Clock, Timer } from "../clock.js";
import { InFlight, settle, type Call } from "./in-flight.js";
import {
  bulk,
  encodeCommand,
  isAscii,
  ReplyError,
  ReplyReader,
  type Reply,
  type ScriptCall,
} from "./resp.js";

/** Where a pipe connects and how it authenticates. */
export interface PipeTarget {
  readonly host: string;
  readonly port: number;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly db: number;
  /** Undefined: plain TCP. */
  readonly tls: ConnectionOptions | undefined;
}

/** A call that reached Redis and got no answer within the pipe's timeout. */
export class PipeTimeout extends Error {
  override readonly name = "PipeTimeout";
}

/** A call that was sent on a connection that closed before its answer came. */
export class PipeClosed extends Error {
  override readonly name = "PipeClosed";
}

/** One Lua script's pipe to one server. */
export interface ScriptPipe {
  /** Connected, authenticated and answering: calls may go through the pipe. */
  readonly ready: boolean;
  /** Runs the script with the arguments of `script`. */
  call(script: ScriptCall): Promise<Reply>;
  /** Connects to `target` (dropping any other connection); reconnects by itself after a fault. */
  open(target: PipeTarget): void;
  /** Drops the connection and stays closed until the next `open`. */
  close(): void;
}

/** The longest wait between two reconnection attempts. */
const MAX_RECONNECT_DELAY_MS = 1000;

/** A script's name for EVALSHA. */
export function scriptSha(text: string): string {
  return createHash("sha1").update(text).digest("hex");
}

/** The name the pipe's connection has in `CLIENT LIST`. */
export const PIPE_CONNECTION_NAME = "gatehouse-scripts";

/** A handshake step; only a refused `required` one fails the connection. */
interface Step {
  readonly command: string;
  readonly required: boolean;
}

// Authenticate, pick the database, name the connection (a user without the right keeps it
// nameless), load the script (so that calls find it), and PING, whose answer means the
// connection is ready.
function handshake(target: PipeTarget, lua: string): Step[] {
  const steps: Step[] = [];
  if (target.password !== undefined) {
    const who = target.username === undefined ? [] : [target.username];
    steps.push({ command: encodeCommand(["AUTH", ...who, target.password]), required: true });
  }
  if (target.db !== 0)
    steps.push({ command: encodeCommand(["SELECT", String(target.db)]), required: true });
  steps.push({
    command: encodeCommand(["CLIENT", "SETNAME", PIPE_CONNECTION_NAME]),
    required: false,
  });
  steps.push({ command: encodeCommand(["SCRIPT", "LOAD", lua]), required: false });
  steps.push({ command: encodeCommand(["PING"]), required: true });
  return steps;
}

/** A pipe that is open while it has a target, and ready once the handshake is answered. */
class Pipe implements ScriptPipe {
  // The command's name and script, as written before a call's arguments: by its SHA, and whole
  // for a server that does not hold it.
  readonly #bySha: string;
  readonly #whole: string;
  readonly #wholeAscii: boolean;
  readonly #inFlight: InFlight;
  #target: PipeTarget | undefined;
  #socket: Socket | undefined;
  #ready = false;
  // The handshake steps still waiting for their answer, in order.
  #steps: Step[] = [];
  #attempts = 0;
  #retry: Timer | undefined;
  // What this turn of the event loop wrote, sent in one write at its end; ASCII, it is written a
  // byte per character, which spares encoding it.
  #out = "";
  #outAscii = true;
  #flushing = false;
  readonly #reader = new ReplyReader((reply) => this.#onReply(reply));

  constructor(
    private readonly lua: string,
    private readonly timeoutMs: number,
    private readonly clock: Clock,
  ) {
    this.#bySha = `${bulk("EVALSHA")}${bulk(scriptSha(lua))}`;
    this.#whole = `${bulk("EVAL")}${bulk(lua)}`;
    this.#wholeAscii = isAscii(lua);
    this.#inFlight = new InFlight(
      clock,
      () => new PipeTimeout(`no answer from Redis within ${timeoutMs} ms`),
    );
  }

  get ready(): boolean {
    return this.#ready;
  }

  call(script: ScriptCall): Promise<Reply> {
    if (this.#socket === undefined) {
      return Promise.reject(new PipeClosed("the pipe has no connection to Redis"));
    }
    return new Promise<Reply>((resolve, reject) => {
      const deadline = this.clock.monotonic() + this.timeoutMs;
      this.#send({ script, deadline, resolve, reject }, this.#bySha, true);
    });
  }

  open(target: PipeTarget): void {
    this.#stop();
    this.#target = target;
    this.#attempts = 0;
    this.#connect();
  }

  close(): void {
    this.#target = undefined;
    this.#stop();
  }

  // Writes `call` as EVALSHA or EVAL: `head` is the name and the script, ASCII or not.
  #send(call: Call, head: string, headAscii: boolean): void {
    const { script } = call;
    this.#inFlight.push(call);
    this.#write(`*${2 + script.count}\r\n${head}${script.encoded}`, headAscii && script.ascii);
  }

  #write(command: string, ascii: boolean): void {
    this.#out += command;
    if (!ascii) this.#outAscii = false;
    if (this.#flushing) return;
    this.#flushing = true;
    setImmediate(() => {
      this.#flushing = false;
      if (this.#out === "") return;
      this.#socket?.write(this.#out, this.#outAscii ? "latin1" : "utf8");
      this.#out = "";
      this.#outAscii = true;
    });
  }

  #onReply(reply: Reply): void {
    if (this.#steps.length > 0) {
      this.#onHandshake(reply);
      return;
    }
    const call = this.#inFlight.take();
    if (call === undefined) {
      // A reply nobody asked for: the connection is out of step.
      this.#drop(true);
      return;
    }
    if (reply instanceof ReplyError && reply.message.startsWith("NOSCRIPT") && call.resolve) {
      // The server does not hold the script (SCRIPT FLUSH): sent whole, it keeps it.
      const again = { ...call, deadline: this.clock.monotonic() + this.timeoutMs };
      call.resolve = undefined;
      call.reject = undefined;
      this.#send(again, this.#whole, this.#wholeAscii);
      return;
    }
    settle(call, reply);
  }

  #onHandshake(reply: Reply): void {
    const step = this.#steps.shift() as Step;
    if (reply instanceof ReplyError && step.required) {
      this.#drop(true);
      return;
    }
    if (this.#steps.length === 0) {
      this.#ready = true;
      this.#attempts = 0;
    }
  }

  #connect(): void {
    const to = this.#target;
    if (to === undefined) return;
    const socket =
      to.tls === undefined
        ? connectTcp({ host: to.host, port: to.port })
        : connectTls({ ...to.tls, host: to.host, port: to.port });
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => {
      if (socket !== this.#socket) return;
      try {
        this.#reader.feed(chunk);
      } catch {
        this.#drop(true);
      }
    });
    // Every error and the close are listened to for the socket's whole life.
    const lost = (): void => {
      if (socket === this.#socket) this.#drop(true);
    };
    socket.on("error", lost);
    socket.on("close", lost);
    this.#steps = handshake(to, this.lua);
    socket.write(this.#steps.map((step) => step.command).join(""));
  }

  // The connection is gone: every call on it fails, and with `reconnect` a new one is made later.
  #drop(reconnect: boolean): void {
    const lost = this.#socket;
    this.#socket = undefined;
    this.#ready = false;
    this.#steps = [];
    this.#out = "";
    this.#outAscii = true;
    this.#reader.reset();
    lost?.destroy();
    this.#inFlight.failAll(new PipeClosed("the connection to Redis closed"));
    if (!reconnect || this.#target === undefined || this.#retry !== undefined) return;
    this.#attempts++;
    const delay = Math.min(this.#attempts * 100, MAX_RECONNECT_DELAY_MS);
    this.#retry = this.clock.after(delay, () => {
      this.#retry = undefined;
      this.#connect();
    });
  }

  #stop(): void {
    this.#retry?.cancel();
    this.#retry = undefined;
    this.#drop(false);
  }
}

/**
 * A closed pipe for `lua`; every call it carries fails after `timeoutMs` without an answer,
 * measured on `clock`.
 */
export function createScriptPipe(lua: string, timeoutMs: number, clock: Clock): ScriptPipe {
  return new Pipe(lua, timeoutMs, clock);
}
