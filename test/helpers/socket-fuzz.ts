/**
 * The client side of the socket fuzzer: fast-check arbitraries for what a client does on one
 * raw connection (requests on every kind of route, pipelined or one at a time, with bodies,
 * `Upgrade` fields, credentials good and bad, WebSocket frames after a handshake, and a reset, a
 * FIN or a stall at a random byte), the bytes each comes to, and a driver that plays one
 * connection and returns every byte it received.
 */
import { randomUUID } from "node:crypto";
import { connect } from "node:net";
import fc from "fast-check";
import { proof, type DpopKey } from "./dpop.js";
import { BEHAVIOURS, type Behaviour } from "./hostile-upstream.js";
import { form } from "./tokens.js";

/** The kinds of route a request goes to, by the path prefix the fuzzer's config gives them. */
export const ROUTES = {
  token: "/oauth/token",
  bearer: "/api",
  dpop: "/bound",
  open: "/open",
  websocket: "/ws",
  "open-websocket": "/live",
  unknown: "/nowhere",
  health: "/healthz",
} as const;

/** One of ROUTES' kinds. */
export type RouteKind = keyof typeof ROUTES;

/** The fuzzer's routes, for its config: each kind behind its prefix. */
export const ROUTES_YAML = `routes:
  - path: ${ROUTES.bearer}/**
    methods: [GET, HEAD, POST, PUT]
  - path: ${ROUTES.dpop}/**
    methods: [GET, HEAD, POST, PUT]
    dpop: required
  - path: ${ROUTES.open}/**
    methods: [GET, HEAD, POST, PUT]
    auth: none
  - path: ${ROUTES.websocket}/**
    methods: [GET]
    websocket: true
    token_from: [header, query, subprotocol]
  - path: ${ROUTES["open-websocket"]}/**
    methods: [GET]
    auth: none
    websocket: true
`;

/** What a request presents: a good token of either kind (in a subprotocol too), a bad one, or none. */
export type Credential =
  "none" | "bearer" | "subprotocol" | "dpop" | "dpop-without-proof" | "tampered" | "garbage";

/** The `Upgrade` a request carries, a WebSocket handshake's fields with it where it names one. */
export type UpgradeKind = "none" | "websocket" | "websocket-without-key" | "h2c" | "websocket, h2c";

/** A request's body: none, a Content-Length one, or chunks. */
export type BodySpec =
  | { readonly kind: "none" }
  | { readonly kind: "length"; readonly size: number }
  | { readonly kind: "chunked"; readonly sizes: readonly number[] };

/** One WebSocket frame a client sends (RFC 6455 §5.2), well-formed or not. */
export interface FrameSpec {
  readonly opcode: number;
  readonly size: number;
  readonly fin: boolean;
  readonly masked: boolean;
  readonly mask: number;
}

/** One request, with the upstream's behaviour its path asks for and the frames sent after it. */
export interface RequestSpec {
  readonly route: RouteKind;
  readonly method: "GET" | "HEAD" | "POST" | "PUT";
  readonly credential: Credential;
  readonly upgrade: UpgradeKind;
  readonly body: BodySpec;
  readonly behaviour: Behaviour;
  /** The byte the upstream cuts its answer at, or the seed of its garbage. */
  readonly offset: number;
  readonly http10: boolean;
  readonly close: boolean;
  readonly expectContinue: boolean;
  readonly frames: readonly FrameSpec[];
}

/**
 * How a connection ends: a reset, a FIN, or a stall (the client stops and waits, then closes),
 * after `at` bytes of what it writes (`whileWriting`) or of what it receives.
 */
export interface CutSpec {
  readonly how: "reset" | "fin" | "stall";
  readonly whileWriting: boolean;
  readonly at: number;
}

/** One client connection: its requests, written at once or one at a time, and its end. */
export interface ConnectionSpec {
  readonly requests: readonly RequestSpec[];
  readonly pipelined: boolean;
  readonly cut: CutSpec;
}

const weighted = <T>(...choices: ReadonlyArray<readonly [number, T]>): fc.Arbitrary<T> =>
  fc.oneof(...choices.map(([weight, value]) => ({ weight, arbitrary: fc.constant(value) })));

const frameArb: fc.Arbitrary<FrameSpec> = fc.record({
  opcode: weighted<number>([4, 1], [3, 2], [1, 0], [1, 8], [1, 9], [1, 10], [1, 3]),
  size: fc.oneof(
    { weight: 8, arbitrary: fc.nat(200) },
    { weight: 1, arbitrary: fc.constant(70_000) },
  ),
  fin: weighted([6, true], [1, false]),
  masked: weighted([8, true], [1, false]),
  mask: fc.nat(),
});

const bodyArb: fc.Arbitrary<BodySpec> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: "none" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("length" as const), size: fc.nat(3000) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("chunked" as const),
      sizes: fc.array(fc.integer({ min: 1, max: 500 }), { maxLength: 4 }),
    }),
  },
);

const requestArb: fc.Arbitrary<RequestSpec> = fc.record({
  route: weighted<RouteKind>(
    [2, "token"],
    [3, "bearer"],
    [3, "dpop"],
    [3, "open"],
    [5, "websocket"],
    [4, "open-websocket"],
    [1, "unknown"],
    [1, "health"],
  ),
  method: weighted<RequestSpec["method"]>([8, "GET"], [1, "HEAD"], [2, "POST"], [1, "PUT"]),
  credential: weighted<Credential>(
    [3, "none"],
    [4, "bearer"],
    [1, "subprotocol"],
    [3, "dpop"],
    [1, "dpop-without-proof"],
    [2, "tampered"],
    [1, "garbage"],
  ),
  upgrade: weighted<UpgradeKind>(
    [3, "none"],
    [6, "websocket"],
    [1, "websocket-without-key"],
    [1, "h2c"],
    [1, "websocket, h2c"],
  ),
  body: bodyArb,
  behaviour: fc.constantFrom(...BEHAVIOURS),
  offset: fc.nat(400),
  http10: weighted([9, false], [1, true]),
  close: weighted([5, false], [1, true]),
  expectContinue: weighted([9, false], [1, true]),
  frames: fc.array(frameArb, { maxLength: 4 }),
});

/** One connection of a sequence. */
export const connectionArb: fc.Arbitrary<ConnectionSpec> = fc.record({
  requests: fc.array(requestArb, { minLength: 1, maxLength: 4 }),
  pipelined: fc.boolean(),
  cut: fc.record({
    how: weighted<CutSpec["how"]>([3, "reset"], [2, "fin"], [1, "stall"]),
    whileWriting: fc.boolean(),
    // Often at once after the last write, or around the first answer's first bytes, where a
    // refusal is being written.
    at: fc.oneof(
      { weight: 2, arbitrary: fc.constant(0) },
      { weight: 3, arbitrary: fc.nat(40) },
      { weight: 2, arbitrary: fc.nat(1500) },
    ),
  }),
});

/** A sequence: the connections played at once. */
export const sequenceArb: fc.Arbitrary<readonly ConnectionSpec[]> = fc.array(connectionArb, {
  minLength: 1,
  maxLength: 4,
});

/** What requests are made with: the credentials obtained once at the start. */
export interface Credentials {
  readonly client: { readonly id: string; readonly secret: string };
  readonly bearer: string;
  readonly bound: string;
  readonly key: DpopKey;
}

/** The Host every request names, which DPoP proofs' `htu` follows. */
const HOST = "fuzz.test";

/** A client frame's bytes, its payload naming `marker`. */
export function frameBytes(frame: FrameSpec, marker: string, index: number): Buffer {
  const text = Buffer.from(`frame ${marker} ${index} `);
  let payload = Buffer.alloc(frame.size);
  for (let i = 0; i < payload.length; i += text.length) text.copy(payload, i);
  // A close frame starts with its code (RFC 6455 §5.5.1).
  if (frame.opcode === 8 && payload.length >= 2) payload.writeUInt16BE(1000, 0);
  const length =
    payload.length < 126
      ? Buffer.from([payload.length])
      : payload.length < 65_536
        ? Buffer.from([126, payload.length >> 8, payload.length & 0xff])
        : Buffer.concat([Buffer.from([127]), bigLength(payload.length)]);
  length[0] = (length[0] as number) | (frame.masked ? 0x80 : 0);
  const head = Buffer.concat([Buffer.from([(frame.fin ? 0x80 : 0) | frame.opcode]), length]);
  if (!frame.masked) return Buffer.concat([head, payload]);
  const mask = Buffer.alloc(4);
  mask.writeUInt32BE(frame.mask >>> 0);
  payload = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] as number)));
  return Buffer.concat([head, mask, payload]);
}

function bigLength(length: number): Buffer {
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(BigInt(length));
  return bytes;
}

/** A request's target: its route's prefix, then the marker and what the upstream does. */
function targetOf(spec: RequestSpec, marker: string): string {
  const prefix = ROUTES[spec.route];
  if (spec.route === "token" || spec.route === "health") return prefix;
  return `${prefix}/${marker}/${spec.behaviour}/${spec.offset}`;
}

async function authorization(
  spec: RequestSpec,
  target: string,
  credentials: Credentials,
): Promise<string> {
  const { bearer, bound, key } = credentials;
  switch (spec.credential) {
    case "none":
      return "";
    case "bearer":
      return `Authorization: Bearer ${bearer}\r\n`;
    // As a browser sends it, beside a protocol of its own; read on the WebSocket route only.
    case "subprotocol":
      return `Sec-WebSocket-Protocol: bearer.${bearer}, chat\r\n`;
    case "dpop": {
      const signed = await proof(key, {
        htm: spec.method,
        htu: `http://${HOST}${target}`,
        iat: Math.floor(Date.now() / 1000),
        token: bound,
      });
      return `Authorization: DPoP ${bound}\r\nDPoP: ${signed}\r\n`;
    }
    case "dpop-without-proof":
      return `Authorization: DPoP ${bound}\r\n`;
    case "tampered":
      return `Authorization: Bearer ${bearer.slice(0, -4)}AAAA\r\n`;
    case "garbage":
      return `Authorization: Bearer ${randomUUID()}!\r\n`;
  }
}

function upgradeFields(spec: RequestSpec, index: number): string {
  const key = Buffer.from(`fuzz-key-${String(index).padStart(7, "0")}`).toString("base64");
  const connection = spec.close ? "Upgrade, close" : "Upgrade";
  switch (spec.upgrade) {
    case "none":
      return spec.close ? "Connection: close\r\n" : "";
    case "websocket":
    case "websocket, h2c":
      return (
        `Connection: ${connection}\r\nUpgrade: ${spec.upgrade}\r\n` +
        `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n`
      );
    case "websocket-without-key":
      return `Connection: ${connection}\r\nUpgrade: websocket\r\n`;
    case "h2c":
      return `Connection: ${connection}, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n`;
  }
}

function bodyOf(spec: RequestSpec, credentials: Credentials): { fields: string; bytes: Buffer } {
  const { body } = spec;
  if (spec.route === "token") {
    // A token request: good credentials with a good token's credential, else wrong ones.
    const secret = spec.credential === "bearer" ? credentials.client.secret : "wrong-secret";
    const text = form([
      ["grant_type", "client_credentials"],
      ["client_id", credentials.client.id],
      ["client_secret", secret],
    ]);
    return {
      fields: `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${text.length}\r\n`,
      bytes: Buffer.from(text),
    };
  }
  switch (body.kind) {
    case "none":
      return { fields: "", bytes: Buffer.alloc(0) };
    case "length":
      return {
        fields: `Content-Length: ${body.size}\r\n`,
        bytes: Buffer.alloc(body.size, "b"),
      };
    case "chunked": {
      const chunks = body.sizes.map((size) => `${size.toString(16)}\r\n${"c".repeat(size)}\r\n`);
      return {
        fields: "Transfer-Encoding: chunked\r\n",
        bytes: Buffer.from(`${chunks.join("")}0\r\n\r\n`),
      };
    }
  }
}

/** The bytes of one request, then those of its frames: what a client writes for it. */
export async function requestBytes(
  spec: RequestSpec,
  marker: string,
  index: number,
  credentials: Credentials,
): Promise<readonly [Buffer, Buffer]> {
  const target = targetOf(spec, marker);
  const body = bodyOf(spec, credentials);
  const head =
    `${spec.route === "token" ? "POST" : spec.method} ${target} HTTP/1.${spec.http10 ? 0 : 1}\r\n` +
    `Host: ${HOST}\r\nX-Marker: ${marker}\r\n` +
    (await authorization(spec, target, credentials)) +
    upgradeFields(spec, index) +
    (spec.expectContinue ? "Expect: 100-continue\r\n" : "") +
    `${body.fields}\r\n`;
  const frames = spec.frames.map((frame, i) => frameBytes(frame, marker, i));
  return [Buffer.concat([Buffer.from(head, "latin1"), body.bytes]), Buffer.concat(frames)];
}

/** How long a driver waits for the next byte before it goes on anyway. */
const QUIET_MS = 150;

/**
 * Plays one connection to 127.0.0.1:port: writes `segments` at once (`pipelined`) or each after
 * the answer to the one before has begun, cuts the connection as `cut` says, and resolves with
 * every byte received once the socket has closed.
 */
export async function drive(
  port: number,
  segments: readonly Buffer[],
  pipelined: boolean,
  cut: CutSpec,
): Promise<Buffer> {
  const socket = connect(port, "127.0.0.1");
  const chunks: Buffer[] = [];
  let received = 0;
  let closed = false;
  let poke: (() => void) | undefined;
  const event = (): void => {
    const waiting = poke;
    poke = undefined;
    waiting?.();
  };
  // A reset by gatehouse is one of the answers this client may get.
  socket.on("error", () => undefined);
  socket.on("data", (chunk: Buffer) => {
    chunks.push(chunk);
    received += chunk.length;
    event();
  });
  const gone = new Promise<void>((done) =>
    socket.on("close", () => {
      closed = true;
      event();
      done();
    }),
  );
  // Waits until `enough` holds or the socket closes, re-checked at each event; or until nothing
  // happens for QUIET_MS, as a client that stops waiting does.
  const until = async (enough: () => boolean): Promise<void> => {
    while (!closed && !enough()) {
      const quiet = await new Promise<boolean>((done) => {
        const timer = setTimeout(() => done(true), QUIET_MS);
        poke = () => {
          clearTimeout(timer);
          done(false);
        };
      });
      if (quiet) return;
    }
  };
  await new Promise<void>((done) => {
    socket.once("connect", done);
    socket.once("close", done);
  });
  const total = segments.reduce((sum, segment) => sum + segment.length, 0);
  const stopAt = cut.whileWriting ? cut.at % (total + 1) : total;
  let written = 0;
  for (const group of pipelined ? [Buffer.concat(segments)] : segments) {
    if (closed || written >= stopAt) break;
    const part = group.subarray(0, stopAt - written);
    socket.write(part);
    written += part.length;
    if (!pipelined && part.length > 0) {
      const before = received;
      await until(() => received > before);
    }
  }
  if (!cut.whileWriting) await until(() => received >= cut.at);
  if (cut.how === "reset") {
    socket.resetAndDestroy();
  } else {
    if (cut.how === "fin") socket.end();
    await until(() => false);
    socket.destroy();
  }
  await gone;
  return Buffer.concat(chunks);
}

/** The markers of `markers` other than `own` found in `bytes`. */
export function foreignMarkers(bytes: Buffer, own: string, markers: ReadonlySet<string>): string[] {
  const found = bytes.toString("latin1").match(/mk\d+x\d+k/g) ?? [];
  return [...new Set(found)].filter((marker) => marker !== own && markers.has(marker));
}
