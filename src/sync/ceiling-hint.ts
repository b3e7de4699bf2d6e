/**
 * A run held back by its own in-flight ceiling (`concurrency`) rather than by the server's quota:
 * far from the server each request holds its slot for a round trip, and ceiling ÷ round trip is all
 * the run can send (Little's law). Nothing else in a run's counters shows it (no 429, no wait), so
 * the run says it: in the journal, the log and the CLI's summary. So too a run that met no 429 while
 * the in-flight count sized before any quota is known (for 200 req/s) was all taken: only a 429 sets a
 * rate to size for, so a quota above that rate is never found by itself (--max-rps names it).
 */
import { MAX_CONCURRENCY } from "../core/config.js";
import type { CeilingReport } from "../scheduler/scheduler.js";

/** Held for less than this, a run is not worth a hint: a second is what a busy moment costs anyway. */
const HINT_MIN_HELD_MS = 1_000;
/** ...or for less than this share of its sending time: a burst after a pause fills the ceiling briefly. */
const HINT_MIN_SHARE = 0.25;

/** What to tell the user when the ceiling, or the in-flight count sized before any 429, held the run back (null: neither did, or not enough to say). */
export function ceilingHint(r: CeilingReport): string | null {
  if (!heldLongEnough(r.heldMs, r.sendingMs)) return r.unpaced && heldLongEnough(r.unpaced.heldMs, r.sendingMs) ? unpacedHint(r, r.unpaced) : null;
  const held = `the in-flight ceiling (concurrency ${r.ceiling}) was full for ${seconds(r.heldMs)} of ${seconds(r.sendingMs)} of sending`;
  const most =
    r.roundTripMs > 0 ? `: at a median round trip of ${Math.round(r.roundTripMs)} ms, ${r.ceiling} in flight send at most about ${Math.round((r.ceiling * 1000) / r.roundTripMs)} req/s` : "";
  const advice =
    r.ceiling < MAX_CONCURRENCY ? `; if the server's quota allows more, raise --concurrency (config: concurrency, up to ${MAX_CONCURRENCY})` : `; ${MAX_CONCURRENCY} is the most concurrency allows`;
  return held + most + advice;
}

function heldLongEnough(heldMs: number, sendingMs: number): boolean {
  return heldMs >= HINT_MIN_HELD_MS && heldMs >= HINT_MIN_SHARE * sendingMs;
}

/**
 * No 429 in the run, and the in-flight count the scheduler sizes for before any quota is known (a
 * rate of `sizedForRps` at the round trip) was full: a quota above that rate is not found by a run
 * that never meets it (200 req/s sized, a quota of 500 per second 50 ms away: 2.3x its least time in
 * the harness, 1.01x with --max-rps 500, which sizes the count for the rate named).
 */
function unpacedHint(r: CeilingReport, u: NonNullable<CeilingReport["unpaced"]>): string {
  const held = `no request was refused, and the ${u.limit} requests in flight sized for a quota of ${u.sizedForRps} req/s (none named, none met) were all taken for ${seconds(u.heldMs)} of ${seconds(r.sendingMs)} of sending`;
  const most = r.roundTripMs > 0 ? `: at a median round trip of ${Math.round(r.roundTripMs)} ms, about ${Math.round((u.limit * 1000) / r.roundTripMs)} req/s` : "";
  return `${held}${most}; if the server's quota allows more, --max-rps N (config: rateLimit.requestsPerSecond) sizes them for N`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
