/**
 * Compare a mirror database with the simulator's ground truth, row by row: the
 * workspace, every location, every current SKU, its root and leaf quantities with
 * freshness, and its complete history as a multiset of rows (rows identical in every field are
 * each counted: every copy must be stored). Returns the differences.
 */
import Database from "better-sqlite3";
import type { GroundTruth } from "../../src/simulator/index.js";

type Row = Record<string, unknown>;

const historyTuple = (r: Row) =>
  JSON.stringify([
    r.kind, r.occurredAt, r.direction ?? null, r.quantity, r.locationId, r.locationName ?? null, r.locationCode ?? null,
    r.eventId ?? null, r.eventTypeCode ?? null, r.eventTypeName ?? null, r.setSessionId ?? null, r.setTypeCode ?? null,
    r.observedQuantity ?? null, r.note ?? null,
  ]);

/** The elements of `a` left after removing one occurrence per element of `b`. */
export function multisetMinus(a: readonly string[], b: readonly string[]): string[] {
  const left = new Map<string, number>();
  for (const x of b) left.set(x, (left.get(x) ?? 0) + 1);
  return a.filter((x) => {
    const n = left.get(x) ?? 0;
    if (n > 0) left.set(x, n - 1);
    return n === 0;
  });
}

export function diffAgainstTruth(dbPath: string, truth: GroundTruth): string[] {
  const db = new Database(dbPath, { readonly: true });
  const diffs: string[] = [];
  const eq = (what: string, got: unknown, want: unknown) => {
    if (JSON.stringify(got) !== JSON.stringify(want)) diffs.push(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  };
  try {
    const ws = db.prepare("SELECT id, name, scope FROM workspace").all() as Row[];
    eq("workspace", ws, [{ id: truth.workspace.workspace.id, name: truth.workspace.workspace.name, scope: truth.workspace.scope }]);

    const locs = new Map((db.prepare("SELECT * FROM locations WHERE deleted_at IS NULL").all() as Row[]).map((r) => [r.id as string, r]));
    eq("location count", locs.size, truth.locations.length);
    for (const l of truth.locations as Row[]) {
      const r = locs.get(l.id as string);
      if (!r) {
        diffs.push(`location ${l.id} missing`);
        continue;
      }
      eq(`location ${l.id}`, [r.name, r.code, r.parent_id, r.parent_name, r.node_kind, r.depth, JSON.parse(r.path_ids as string), JSON.parse(r.path_names as string), r.display_path, r.is_leaf, r.child_count, r.selectable, r.status, r.updated_at],
        [l.name, l.code, l.parentId, l.parentName, l.nodeKind, l.depth, l.pathIds, l.pathNames, l.displayPath, l.isLeaf ? 1 : 0, l.childCount, l.selectable ? 1 : 0, l.status, l.updatedAt]);
    }

    const skus = new Map((db.prepare("SELECT * FROM skus WHERE deleted_at IS NULL").all() as Row[]).map((r) => [r.id as string, r]));
    eq("current SKU count", skus.size, truth.skus.length);
    const rootQ = db.prepare("SELECT root_location_id, quantity FROM sku_root_quantities WHERE sku_id = ? ORDER BY root_location_id");
    const leafQ = db.prepare(`SELECT location_id, quantity, freshness_status, freshness_last_replayed_at, freshness_last_source_kind,
      location_name, location_code, parent_id FROM sku_location_quantities WHERE sku_id = ? ORDER BY location_id`);
    const hist = db.prepare("SELECT * FROM history WHERE sku_id = ?");
    const view = db.prepare("SELECT location_id, quantity, freshness_status, scan_not_reflected FROM stock_by_location WHERE sku_id = ? ORDER BY location_id");
    for (const t of truth.skus) {
      const item = t.item as Row & { product?: Row; options?: Row; locationQuantities?: Record<string, number> };
      const id = item.id as string;
      const r = skus.get(id);
      if (!r) {
        diffs.push(`SKU ${id} missing`);
        continue;
      }
      eq(`SKU ${id} fields`, [r.code, r.sku_code, r.name, r.barcode, r.unit, r.product_id, r.product_name, r.product_brand, JSON.parse(r.options as string), r.total_quantity],
        [item.code, item.skuCode, item.name, item.barcode, item.unit, item.product?.id, item.product?.name, item.product?.brand, item.options ?? {}, item.totalQuantity]);
      const wantRoots = Object.entries(item.locationQuantities ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => ({ root_location_id: k, quantity: v }));
      eq(`SKU ${id} root quantities`, rootQ.all(id), wantRoots);
      const detailLocs = ((t.detail as Row).locations as Row[]).slice().sort((a, b) => ((a.id as string) < (b.id as string) ? -1 : 1));
      eq(`SKU ${id} leaf quantities`, leafQ.all(id), detailLocs.map((l) => {
        const f = (l.freshness ?? {}) as Row;
        return {
          location_id: l.id, quantity: l.quantity, freshness_status: f.status ?? null, freshness_last_replayed_at: f.lastReplayedAt ?? null,
          freshness_last_source_kind: f.lastSourceKind ?? null, location_name: l.name ?? null, location_code: l.code ?? null, parent_id: l.parentId ?? null,
        };
      }));
      eq(`SKU ${id} stock_by_location`, view.all(id), detailLocs.map((l) => {
        const status = ((l.freshness ?? {}) as Row).status ?? null;
        return { location_id: l.id, quantity: l.quantity, freshness_status: status, scan_not_reflected: status === "clean" ? 0 : 1 };
      }));
      const got = (hist.all(id) as Row[]).map((h) => historyTuple({
        kind: h.kind, occurredAt: h.occurred_at, direction: h.direction, quantity: h.quantity, locationId: h.location_id,
        locationName: h.location_name, locationCode: h.location_code, eventId: h.event_id, eventTypeCode: h.event_type_code,
        eventTypeName: h.event_type_name, setSessionId: h.set_session_id, setTypeCode: h.set_type_code,
        observedQuantity: h.observed_quantity, note: h.note,
      })).sort();
      const want = (t.history as Row[]).map(historyTuple).sort();
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        const missing = multisetMinus(want, got).length;
        const extra = multisetMinus(got, want).length;
        diffs.push(`SKU ${id} history: ${got.length} rows stored, ${want.length} in truth (${missing} missing, ${extra} extra)`);
      }
    }
  } finally {
    db.close();
  }
  return diffs;
}

/** Row counts of every data table, to show a rerun changed nothing. */
export function tableCounts(dbPath: string): Record<string, number> {
  const db = new Database(dbPath, { readonly: true });
  try {
    const out: Record<string, number> = {};
    for (const t of ["workspace", "locations", "skus", "sku_root_quantities", "sku_location_quantities", "history"]) {
      out[t] = (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
    }
    out.deleted_skus = (db.prepare("SELECT count(*) AS n FROM skus WHERE deleted_at IS NOT NULL").get() as { n: number }).n;
    return out;
  } finally {
    db.close();
  }
}
