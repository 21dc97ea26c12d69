/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): reading an inbound `traceparent`,
 * the ids gatehouse gives its own span, and the sampling decision it forwards.
 */
import { randomFillSync } from "node:crypto";

/** The parts of a valid inbound `traceparent` that gatehouse continues. */
export interface TraceParent {
  readonly traceId: string;
  readonly parentId: string;
  readonly sampled: boolean;
}

// Trace Context §3.2.2: version 00 is exactly `00-` 32 hex `-` 16 hex `-` 2 hex, lower case.
const VERSION_00_LENGTH = 55;
const ZERO_TRACE_ID = "0".repeat(32);
const ZERO_PARENT_ID = "0".repeat(16);

function lowerHex(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false;
  }
  return true;
}

/**
 * Parses a `traceparent` value; undefined when it is invalid (gatehouse then starts a trace).
 * A version above 00 is read as Trace Context §4.3 says: its first 55 characters in the version
 * 00 layout, followed by nothing or by `-` and fields this version does not know. Version ff,
 * upper-case hex, wrong lengths and all-zero ids are invalid; so are two header lines, which Node
 * joins with ", " and which therefore never fit the layout.
 */
export function parseTraceParent(value: string | undefined): TraceParent | undefined {
  if (value === undefined || value.length < VERSION_00_LENGTH) return undefined;
  if (!lowerHex(value, 0, 2) || value.startsWith("ff")) return undefined;
  if (
    value.startsWith("00")
      ? value.length !== VERSION_00_LENGTH
      : value[55] !== undefined && value[55] !== "-"
  ) {
    return undefined;
  }
  if (value[2] !== "-" || value[35] !== "-" || value[52] !== "-") return undefined;
  if (!lowerHex(value, 3, 35) || !lowerHex(value, 36, 52) || !lowerHex(value, 53, 55)) {
    return undefined;
  }
  const traceId = value.slice(3, 35);
  const parentId = value.slice(36, 52);
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_PARENT_ID) return undefined;
  // Only the sampled bit (the lowest) has a meaning in version 00; the others are ignored.
  const sampled = (value.charCodeAt(54) - (value.charCodeAt(54) <= 57 ? 48 : 87)) % 2 === 1;
  return { traceId, parentId, sampled };
}

/** The `traceparent` gatehouse forwards: its own span as the parent, in version 00. */
export function formatTraceParent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;
}

/** Where trace and span ids come from; tests inject one to pin them. */
export interface TraceIds {
  /** 32 lower-case hex digits, not all zero. */
  traceId(): string;
  /** 16 lower-case hex digits, not all zero. */
  spanId(): string;
}

const POOL_BYTES = 4096;

/**
 * Random ids from a pool of random bytes refilled 4 KiB at a time, as request ids are made: one
 * `randomFillSync` serves 170 requests' trace and span ids. An all-zero id (invalid in Trace
 * Context §3.2.2.3) is drawn again.
 */
export function createTraceIds(): TraceIds {
  const pool = Buffer.allocUnsafe(POOL_BYTES);
  let next = POOL_BYTES;
  const draw = (bytes: number, zero: string): string => {
    for (;;) {
      if (next + bytes > POOL_BYTES) {
        randomFillSync(pool);
        next = 0;
      }
      const id = pool.toString("hex", next, next + bytes);
      next += bytes;
      if (id !== zero) return id;
    }
  };
  return {
    traceId: () => draw(16, ZERO_TRACE_ID),
    spanId: () => draw(8, ZERO_PARENT_ID),
  };
}

/**
 * OpenTelemetry's TraceIdRatioBased sampler as the JavaScript SDK computes it: the four 32-bit
 * words of the trace id XORed together, sampled below `ratio` of 2^32. Computing it the same way
 * means another service sampling with the same ratio decides the same for the same trace.
 */
export function ratioSampler(ratio: number): (traceId: string) => boolean {
  if (ratio >= 1) return () => true;
  if (ratio <= 0) return () => false;
  const upperBound = Math.floor(ratio * 0xffffffff);
  return (traceId) => {
    let accumulated = 0;
    for (let i = 0; i < 32; i += 8) {
      accumulated = (accumulated ^ parseInt(traceId.slice(i, i + 8), 16)) >>> 0;
    }
    return accumulated < upperBound;
  };
}
