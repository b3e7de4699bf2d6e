/**
 * The four places where the sync run still reaches into the store's database: two prepared
 * statements, the transaction around the last list page and the end of the walk, and the
 * snapshot written through `store.db`. Gathered here, each as one small function, so that
 * each becomes a Store method in one step (issue 12 §1: SQL lives only in src/store/) and
 * this file goes away.
 */
import type { ListPage } from "./walker.js";
import type { PlanReason, Planner } from "./planner.js";
import { saveSnapshot } from "../store/snapshots.js";
import type { RunState, Store } from "../store/store.js";

/** The cadence of incremental runs, measured: time since the previous one started (1 min to 1 day); 5 min when unknown. */
export function cycleIntervalMs(store: Store, run: RunState): number {
  const prev = store.db
    .prepare("SELECT started_at FROM sync_runs WHERE mode = 'incremental' AND id < ? ORDER BY id DESC LIMIT 1")
    .get(run.id) as { started_at: string } | undefined;
  const gap = prev ? Date.now() - Date.parse(prev.started_at) : 5 * 60_000;
  return Math.min(Math.max(gap, 60_000), 86_400_000);
}

/** SKUs this walk has already fetched (a resumed run counts them as done). */
export function countFetchedInWalk(store: Store, walkId: number): number {
  return (store.db.prepare("SELECT count(*) AS n FROM sku_sync WHERE fetched_walk_id = ?").get(walkId) as { n: number }).n;
}

/**
 * One list page with its plan. The last page and the end of the walk (misses, deletions)
 * commit together: a run stopped after it must not leave list_done set with the walk's
 * deletions not applied, since a resumed run skips the list walk. `deleted` is the number of
 * SKUs the end of the walk marked deleted (null before the last page).
 */
export function savePlannedPage(
  store: Store,
  run: RunState,
  page: Pick<ListPage, "items" | "nextCursor">,
  planner: Planner,
  deleteAfterMisses: number,
): { queued: Array<{ id: string; reason: PlanReason }>; deleted: number | null } {
  if (page.nextCursor !== null) return { queued: store.savePage(run, page.items, page.nextCursor, planner), deleted: null };
  return store.db.transaction(() => {
    const queued = store.savePage(run, page.items, page.nextCursor, planner);
    return { queued, deleted: store.finishListWalk(run, deleteAfterMisses) };
  })();
}

/** The run's snapshot of the root summaries and totals (from the first list page, which covers the whole result). */
export function saveRunSnapshot(store: Store, runId: number, page: Pick<ListPage, "roots" | "summary">): void {
  saveSnapshot(store.db, runId, page.roots, page.summary);
}
