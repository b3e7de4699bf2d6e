/**
 * The planner decides, from what the list walk shows, which SKUs need their detail
 * and history fetched in this walk, and why. It sees records and the store's memory
 * of them, never HTTP, so it is tested without a server.
 */
import { movedInWalk, type PlanDecision, type RunState } from "../store/store.js";

export type PlanReason = "new" | "changed" | "repolled" | "retried";

export interface Planner {
  /** Why the SKU must be fetched in this walk, or null when the list shows nothing to do (the store's savePage calls it per listed SKU). */
  reason: PlanDecision<PlanReason>;
}

/** Full sync: every listed SKU, except those this same walk already stored (a resumed run does not refetch them). */
export function planFull(run: RunState): Planner {
  return {
    reason: (_item, fp, prev) => {
      if (prev?.fetched_walk_id === run.walkId) return movedInWalk(prev, fp, run.walkId) ? "changed" : null;
      return prev?.fetched_walk_id == null ? "new" : "changed";
    },
  };
}

/**
 * Incremental sync: only what the list shows may have changed, what was not settled,
 * and what an earlier run left undone. Unchanged SKUs cost no request beyond the list page.
 * (What the list cannot show is caught by rotating re-verification, queued after the walk.)
 */
export function planIncremental(run: RunState): Planner {
  return {
    reason: (_item, fingerprint, prev) => {
      if (!prev || prev.fetched_walk_id == null) return prev?.fail_count ? "retried" : "new";
      // Done earlier in this (resumed) walk, unless listed again since with a change (movedInWalk): then fetched again.
      if (prev.fetched_walk_id === run.walkId) return movedInWalk(prev, fingerprint, run.walkId) ? "changed" : null;
      if (prev.fail_count > 0 || (prev.pending_walk_id != null && prev.pending_walk_id !== run.walkId)) return "retried";
      if (prev.list_fingerprint !== fingerprint) return "changed";
      if (prev.not_clean) return "repolled";
      return null;
    },
  };
}

/**
 * How many SKUs each cycle re-verifies so that every SKU is re-verified within the
 * window: N x (interval / window), rounded up. E.g. 10,000 SKUs, 5-minute cycles and
 * a 24 h window: 35 per cycle. A cycle that runs late or is skipped shortens nobody's
 * window by more than one interval, because the stalest SKUs always go first.
 */
export function reverifyShare(currentSkus: number, intervalMs: number, windowMs: number): number {
  if (currentSkus <= 0 || intervalMs <= 0 || windowMs <= 0) return 0;
  return Math.ceil((currentSkus * Math.min(intervalMs, windowMs)) / windowMs);
}
