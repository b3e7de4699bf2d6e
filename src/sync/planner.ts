/**
 * The planner decides, from what the list walk shows, which SKUs need their detail
 * and history fetched in this walk. It sees records and the store's memory of them,
 * never HTTP, so it is tested without a server.
 */
import type { ListItem } from "../core/api-schemas.js";
import type { RunState } from "../store/store.js";

export interface PreviousState {
  list_fingerprint: string | null;
  fetched_walk_id: number | null;
  fail_count: number;
}

export interface Planner {
  wants(item: ListItem, fingerprint: string, previous: PreviousState | undefined): boolean;
}

/** Full sync: every listed SKU, except those this same walk already stored (a resumed run does not refetch them). */
export function planFull(run: RunState): Planner {
  return { wants: (_item, _fp, prev) => prev?.fetched_walk_id !== run.walkId };
}
