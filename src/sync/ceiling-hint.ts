/**
 * A run held back by its own in-flight ceiling (`concurrency`) rather than by the server's quota:
 * far from the server each request holds its slot for a round trip, and ceiling ÷ round trip is all
 * the run can send (Little's law). Nothing else in a run's counters shows it (no 429, no wait), so
 * the run says it: in the journal, the log and the CLI's summary.
 */
import { MAX_CONCURRENCY } from "../core/config.js";

/** Held for less than this, a run is not worth a hint: a second is what a busy moment costs anyway. */
const HINT_MIN_HELD_MS = 1_000;
/** ...or for less than this share of its sending time: a burst after a pause fills the ceiling briefly. */
const HINT_MIN_SHARE = 0.25;

export interface CeilingReport {
  /** The configured ceiling (`concurrency`). */
  ceiling: number;
  /** How long it was full outside pauses. */
  heldMs: number;
  /** From the run's first request to its end. */
  sendingMs: number;
  /** The median round trip at the end of the run. */
  roundTripMs: number;
}

/** What to tell the user when the ceiling held the run back (null: it did not, or not enough to say). */
export function ceilingHint(r: CeilingReport): string | null {
  if (r.heldMs < HINT_MIN_HELD_MS || r.heldMs < HINT_MIN_SHARE * r.sendingMs) return null;
  const held = `the in-flight ceiling (concurrency ${r.ceiling}) was full for ${seconds(r.heldMs)} of ${seconds(r.sendingMs)} of sending`;
  const most =
    r.roundTripMs > 0 ? `: at a median round trip of ${Math.round(r.roundTripMs)} ms, ${r.ceiling} in flight send at most about ${Math.round((r.ceiling * 1000) / r.roundTripMs)} req/s` : "";
  const advice =
    r.ceiling < MAX_CONCURRENCY ? `; if the server's quota allows more, raise --concurrency (config: concurrency, up to ${MAX_CONCURRENCY})` : `; ${MAX_CONCURRENCY} is the most concurrency allows`;
  return held + most + advice;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
