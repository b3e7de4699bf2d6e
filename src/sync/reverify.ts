/**
 * Rotating re-verification (incremental runs). What the list cannot show (a transfer inside
 * one root, a SET confirming the same count) is caught by re-fetching, each cycle, the SKUs
 * verified longest ago, whole history included: enough of them that every SKU is
 * re-verified within sync.reverifyWindowHours (planner.ts, reverifyShare), and at least every
 * SKU already past that window.
 */
import { reverifyShare } from "./planner.js";
import type { RunContext } from "./run-context.js";
import type { RunState, Store } from "../store/store.js";

const HOUR_MS = 3_600_000;

/** The cadence of incremental runs, measured: time since the previous one started (1 min to 1 day); 5 min when unknown. */
function cycleIntervalMs(store: Store, run: RunState): number {
  const prev = store.previousIncrementalStart(run.id);
  const gap = prev !== null ? Date.now() - prev : 5 * 60_000;
  return Math.min(Math.max(gap, 60_000), 86_400_000);
}

/** Queue the stalest SKUs due for re-verification, after the list walk. */
export async function queueReverification(ctx: RunContext): Promise<void> {
  const { store, run, stop, feed, tally } = ctx;
  const windowMs = ctx.config.sync.reverifyWindowHours * HOUR_MS;
  const share = reverifyShare(store.countCurrentSkus(), cycleIntervalMs(store, run), windowMs);
  let due = Math.max(share, store.countVerifiedBefore(new Date(Date.now() - windowMs).toISOString()));
  // In slices, so a cycle where every SKU is due does not hold every id at once.
  while (due > 0 && !stop.signal.aborted) {
    const ids = store.queueStalest(run.walkId, Math.min(due, feed.capacity));
    if (ids.length === 0) break;
    due -= ids.length;
    for (const id of ids) {
      if (await feed.offer(id, true)) {
        tally.plan.reverified++;
        tally.planned++;
      }
    }
  }
}
