/**
 * Does a SKU's history (what is stored plus the newest pages just fetched) explain the
 * quantities its detail reports?
 *
 * An incremental sync stops paging history once it is past rows it already holds (see
 * `historyStop` in sku-work.ts). A row that arrived late with an older `occurredAt` deeper than
 * the lookback overlap is then missed, but it changed the quantity: this check sees that
 * the history no longer adds up, and the caller walks the SKU's whole history instead.
 *
 * Per leaf with clean freshness (a non-clean quantity may not reflect the latest rows, so
 * it proves nothing), walking the rows newest first in the server's order: the quantity is
 * the newest SET's observed count plus the signed deltas of the rows above it, or, with no
 * SET, the sum of all signed deltas. The server's order matters: many rows share one
 * occurredAt, a SET among them included, and only the server knows which came first.
 *
 * Assumption (not shown in the document): a leaf's history starts from zero stock, so with
 * no SET the deltas sum to the quantity. A server that truncates old history would fail this
 * check for SKUs without a SET: the cost is a full history walk of such a SKU whenever it
 * changes, never a wrong mirror.
 */
import { CLEAN_FRESHNESS, signedDelta, type DetailResponse } from "../core/api-schemas.js";
import type { ReplayableRow } from "../store/sku.js";

export type { ReplayableRow };

/** Leaf ids whose clean quantity the rows (newest first, in the server's order) do not explain. */
export function unexplainedLeaves(newestFirst: Iterable<ReplayableRow>, detail: Pick<DetailResponse, "locations">): string[] {
  const leaves = new Map<string, { sum: number; set: number | null }>();
  for (const r of newestFirst) {
    let l = leaves.get(r.locationId);
    if (!l) leaves.set(r.locationId, (l = { sum: 0, set: null }));
    if (l.set !== null) continue;
    if (r.kind === "set" && r.observedQuantity !== null) l.set = r.observedQuantity;
    else l.sum += signedDelta(r);
  }
  const out: string[] = [];
  for (const loc of detail.locations) {
    if (loc.freshness.status !== CLEAN_FRESHNESS) continue;
    const l = leaves.get(loc.id);
    const explained = l ? (l.set ?? 0) + l.sum : 0;
    if (!same(explained, loc.quantity)) out.push(loc.id);
  }
  return out;
}

/** Equal up to float noise: quantities are decimals summed in binary floating point. */
function same(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}
