/**
 * The bench's check that a mirror equals the simulator's ground truth, row by row: the
 * workspace, every location, every current SKU (fields, root and leaf quantities with
 * freshness) and its history as a MULTISET (two identical rows are two rows: issue 10 §1).
 * The same comparison as test/helpers/ground-truth.ts, reduced to what a bench reports:
 * the number of differences and the first few. Reads the database read-only.
 */
import Database from "better-sqlite3";
import type { GroundTruth } from "../simulator/index.js";

type Row = Record<string, unknown>;

const historyTuple = (r: Row): string =>
  JSON.stringify([
    r.kind, r.occurredAt, r.direction ?? null, r.quantity, r.locationId, r.locationName ?? null, r.locationCode ?? null,
    r.eventId ?? null, r.eventTypeCode ?? null, r.eventTypeName ?? null, r.setSessionId ?? null, r.setTypeCode ?? null,
    r.observedQuantity ?? null, r.note ?? null,
  ]);

const storedHistoryTuple = (h: Row): string =>
  historyTuple({
    kind: h.kind, occurredAt: h.occurred_at, direction: h.direction, quantity: h.quantity, locationId: h.location_id,
    locationName: h.location_name, locationCode: h.location_code, eventId: h.event_id, eventTypeCode: h.event_type_code,
    eventTypeName: h.event_type_name, setSessionId: h.set_session_id, setTypeCode: h.set_type_code,
    observedQuantity: h.observed_quantity, note: h.note,
  });

export interface TruthCheck {
  equal: boolean;
  differences: number;
  /** The first few differences, for the log. */
  sample: string[];
}

export function compareWithTruth(dbPath: string, truth: GroundTruth): TruthCheck {
  const diffs: string[] = [];
  const eq = (what: string, got: unknown, want: unknown) => {
    if (JSON.stringify(got) !== JSON.stringify(want)) diffs.push(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`.slice(0, 300));
  };
  const db = new Database(dbPath, { readonly: true });
  try {
    eq("workspace", db.prepare("SELECT id, name, scope FROM workspace").all(), [{ id: truth.workspace.workspace.id, name: truth.workspace.workspace.name, scope: truth.workspace.scope }]);
    compareLocations(db, truth, eq);
    compareSkus(db, truth, eq);
  } finally {
    db.close();
  }
  return { equal: diffs.length === 0, differences: diffs.length, sample: diffs.slice(0, 5) };
}

type Eq = (what: string, got: unknown, want: unknown) => void;

function compareLocations(db: Database.Database, truth: GroundTruth, eq: Eq): void {
  const locs = new Map((db.prepare("SELECT * FROM locations WHERE deleted_at IS NULL").all() as Row[]).map((r) => [r.id as string, r]));
  eq("location count", locs.size, truth.locations.length);
  for (const l of truth.locations as Row[]) {
    const r = locs.get(l.id as string);
    if (!r) {
      eq(`location ${l.id}`, null, "present");
      continue;
    }
    eq(`location ${l.id}`, [r.name, r.code, r.parent_id, r.node_kind, r.depth, r.is_leaf, r.child_count, r.selectable, r.status, r.updated_at],
      [l.name, l.code, l.parentId, l.nodeKind, l.depth, l.isLeaf ? 1 : 0, l.childCount, l.selectable ? 1 : 0, l.status, l.updatedAt]);
  }
}

function compareSkus(db: Database.Database, truth: GroundTruth, eq: Eq): void {
  const skus = new Map((db.prepare("SELECT * FROM skus WHERE deleted_at IS NULL").all() as Row[]).map((r) => [r.id as string, r]));
  eq("current SKU count", skus.size, truth.skus.length);
  const rootQ = db.prepare("SELECT root_location_id, quantity FROM sku_root_quantities WHERE sku_id = ? ORDER BY root_location_id");
  const leafQ = db.prepare("SELECT location_id, quantity, freshness_status, freshness_last_replayed_at, freshness_last_source_kind FROM sku_location_quantities WHERE sku_id = ? ORDER BY location_id");
  const hist = db.prepare("SELECT * FROM history WHERE sku_id = ?");
  for (const t of truth.skus) {
    const item = t.item as Row & { product?: Row; options?: Row; locationQuantities?: Record<string, number> };
    const id = item.id as string;
    const r = skus.get(id);
    if (!r) {
      eq(`SKU ${id}`, null, "present");
      continue;
    }
    eq(`SKU ${id} fields`, [r.code, r.sku_code, r.name, r.barcode, r.unit, r.product_id, JSON.parse(r.options as string), r.total_quantity],
      [item.code, item.skuCode, item.name, item.barcode, item.unit, item.product?.id, item.options ?? {}, item.totalQuantity]);
    const wantRoots = Object.entries(item.locationQuantities ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => ({ root_location_id: k, quantity: v }));
    eq(`SKU ${id} root quantities`, rootQ.all(id), wantRoots);
    const detailLocs = ((t.detail as Row).locations as Row[]).slice().sort((a, b) => ((a.id as string) < (b.id as string) ? -1 : 1));
    eq(`SKU ${id} leaf quantities`, leafQ.all(id), detailLocs.map((l) => {
      const f = (l.freshness ?? {}) as Row;
      return { location_id: l.id, quantity: l.quantity, freshness_status: f.status ?? null, freshness_last_replayed_at: f.lastReplayedAt ?? null, freshness_last_source_kind: f.lastSourceKind ?? null };
    }));
    const got = (hist.all(id) as Row[]).map(storedHistoryTuple).sort();
    const want = (t.history as Row[]).map(historyTuple).sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) eq(`SKU ${id} history (multiset)`, `${got.length} rows`, `${want.length} rows`);
  }
}
