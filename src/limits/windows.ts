/** Quota periods on the UTC calendar: which period an instant falls in, and when it ends. */
import type { QuotaConfig } from "../config/schema.js";

/** A quota period name. */
export type Period = QuotaConfig["period"];

/** One calendar period: its start (also its counter key) and its end, epoch milliseconds. */
export interface PeriodSpan {
  readonly startMs: number;
  readonly endMs: number;
  /** `startMs` as text, ready to join into a counter key. */
  readonly id: string;
}

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The UTC calendar period of `period` that contains `nowMs`. */
export function periodAt(period: Period, nowMs: number): PeriodSpan {
  let startMs: number;
  let endMs: number;
  if (period === "hour" || period === "day") {
    const length = period === "hour" ? HOUR_MS : DAY_MS;
    // Epoch time has no leap seconds, so UTC hours and days are whole multiples of their length.
    startMs = nowMs - (((nowMs % length) + length) % length);
    endMs = startMs + length;
  } else {
    const date = new Date(nowMs);
    startMs = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    endMs = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  }
  return { startMs, endMs, id: String(startMs) };
}

/** Remembers the current period so that the hot path computes a new one only at its boundary. */
export function createPeriodClock(period: Period): (nowMs: number) => PeriodSpan {
  let current = periodAt(period, 0);
  return (nowMs) => {
    if (nowMs < current.startMs || nowMs >= current.endMs) current = periodAt(period, nowMs);
    return current;
  };
}
