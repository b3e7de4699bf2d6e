/**
 * Read-only looks into a mirror file from outside the sync, rows as stored: what the
 * comparison with the simulator's ground truth reads (src/bench/truth.ts, shared by the
 * bench and the tests), and the figures the bench's call-economy scenario counts. Nothing
 * here writes; each call opens one read-only connection (openDatabase's) and closes it.
 */
import { openReadOnly, type DB } from "./db.js";

export type Row = Record<string, unknown>;

/** The mirror's current rows, table by table, as the ground-truth comparison reads them. */
export interface MirrorRows {
  workspace(): Row[];
  /** Locations not deleted, every column. */
  locations(): Row[];
  /** SKUs not deleted, every column. */
  skus(): Row[];
  /** root_location_id, quantity; by root id. */
  rootQuantities(skuId: string): Row[];
  /** Quantity, freshness and the leaf's own fields; by location id. */
  leafQuantities(skuId: string): Row[];
  /** The stock_by_location view's quantity and freshness columns; by location id. */
  stockByLocation(skuId: string): Row[];
  /** Every history row of the SKU, every column, in no particular order. */
  history(skuId: string): Row[];
}

function withReadOnly<T>(dbPath: string, read: (db: DB) => T): T {
  const db = openReadOnly(dbPath);
  try {
    return read(db);
  } finally {
    db.close();
  }
}

/** Runs `read` against the mirror's rows through one read-only connection, closed afterwards. */
export function readMirrorRows<T>(dbPath: string, read: (rows: MirrorRows) => T): T {
  return withReadOnly(dbPath, (db) => {
    const rootQ = db.prepare("SELECT root_location_id, quantity FROM sku_root_quantities WHERE sku_id = ? ORDER BY root_location_id");
    const leafQ = db.prepare(`SELECT location_id, quantity, freshness_status, freshness_last_replayed_at, freshness_last_source_kind,
      location_name, location_code, parent_id FROM sku_location_quantities WHERE sku_id = ? ORDER BY location_id`);
    const viewQ = db.prepare("SELECT location_id, quantity, freshness_status, scan_not_reflected FROM stock_by_location WHERE sku_id = ? ORDER BY location_id");
    const histQ = db.prepare("SELECT * FROM history WHERE sku_id = ?");
    return read({
      workspace: () => db.prepare("SELECT id, name, scope FROM workspace").all() as Row[],
      locations: () => db.prepare("SELECT * FROM locations WHERE deleted_at IS NULL").all() as Row[],
      skus: () => db.prepare("SELECT * FROM skus WHERE deleted_at IS NULL").all() as Row[],
      rootQuantities: (skuId) => rootQ.all(skuId) as Row[],
      leafQuantities: (skuId) => leafQ.all(skuId) as Row[],
      stockByLocation: (skuId) => viewQ.all(skuId) as Row[],
      history: (skuId) => histQ.all(skuId) as Row[],
    });
  });
}

/** Row counts of every data table (and of deleted SKUs), to show a rerun changed nothing. */
export function tableCounts(dbPath: string): Record<string, number> {
  return withReadOnly(dbPath, (db) => {
    const out: Record<string, number> = {};
    for (const t of ["workspace", "locations", "skus", "sku_root_quantities", "sku_location_quantities", "history"]) {
      out[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
    }
    out.deleted_skus = (db.prepare("SELECT count(*) AS n FROM skus WHERE deleted_at IS NOT NULL").get() as { n: number }).n;
    return out;
  });
}

// ---- the bench's call economy (scenario 2)

/** The latest run and the list walk it belongs to. */
export function latestRun(dbPath: string): { id: number; walkId: number; finishedAt: string | null } {
  return withReadOnly(dbPath, (db) => {
    const r = db.prepare("SELECT id, walk_id, finished_at FROM sync_runs ORDER BY id DESC LIMIT 1").get() as { id: number; walk_id: number; finished_at: string | null };
    return { id: r.id, walkId: r.walk_id, finishedAt: r.finished_at };
  });
}

/** SKUs holding at least one leaf whose freshness is not clean. */
export function skusNotClean(dbPath: string): Set<string> {
  return withReadOnly(
    dbPath,
    (db) => new Set((db.prepare("SELECT DISTINCT sku_id FROM sku_location_quantities WHERE freshness_status IS NOT 'clean'").all() as Array<{ sku_id: string }>).map((r) => r.sku_id)),
  );
}

/** SKUs whose detail was fetched in the given list walk. */
export function skusFetchedInWalk(dbPath: string, walkId: number): string[] {
  return withReadOnly(dbPath, (db) => (db.prepare("SELECT sku_id FROM sku_sync WHERE fetched_walk_id = ?").all(walkId) as Array<{ sku_id: string }>).map((r) => r.sku_id));
}

/** Rows of each SKU's history. */
export function historyRowCounts(dbPath: string, ids: readonly string[]): Map<string, number> {
  return withReadOnly(dbPath, (db) => {
    const q = db.prepare("SELECT count(*) AS n FROM history WHERE sku_id = ?");
    return new Map(ids.map((id) => [id, (q.get(id) as { n: number }).n]));
  });
}
