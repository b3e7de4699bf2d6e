/**
 * inventory_snapshots: per sync run, the list response's root summaries (`locations[]`)
 * and overall `summary`, so totals can be charted over time. `locations` and `summary`
 * are not paged (they cover the whole filtered result), so any one list page of a run
 * carries them; the sync stores the first page's.
 */
import type Database from "better-sqlite3";
import type { ListResponse } from "../core/api-schemas.js";
import type { DB } from "./db.js";

const statements = new WeakMap<DB, { clear: Database.Statement; insert: Database.Statement }>();

function prepared(db: DB) {
  let s = statements.get(db);
  if (!s) {
    s = {
      clear: db.prepare("DELETE FROM inventory_snapshots WHERE run_id = ?"),
      insert: db.prepare(`INSERT INTO inventory_snapshots (run_id, taken_at, root_id, name, code, child_count, leaf_location_ids,
          sku_count, total_quantity, average_quantity_per_sku)
        VALUES (@runId, @takenAt, @rootId, @name, @code, @childCount, @leafLocationIds, @skuCount, @totalQuantity, @average)`),
    };
    statements.set(db, s);
  }
  return s;
}

/**
 * Store the snapshot of run `runId`, in one transaction: one row per root summary and one
 * overall row (root_id NULL) when the response had a summary. Calling it again for the same
 * run replaces that run's snapshot.
 */
export function saveSnapshot(
  db: DB,
  runId: number,
  roots: ListResponse["locations"],
  summary: ListResponse["summary"],
  takenAt: string = new Date().toISOString(),
): void {
  const s = prepared(db);
  db.transaction(() => {
    s.clear.run(runId);
    for (const r of roots) {
      s.insert.run({
        runId, takenAt, rootId: r.id, name: r.name, code: r.code, childCount: r.childCount,
        leafLocationIds: r.leafLocationIds === null ? null : JSON.stringify(r.leafLocationIds),
        skuCount: r.skuCount, totalQuantity: r.totalQuantity, average: r.averageQuantityPerSku,
      });
    }
    if (summary) {
      s.insert.run({
        runId, takenAt, rootId: null, name: null, code: null, childCount: null, leafLocationIds: null,
        skuCount: summary.skuCount, totalQuantity: summary.totalQuantity, average: summary.averageQuantityPerSku,
      });
    }
  })();
}
