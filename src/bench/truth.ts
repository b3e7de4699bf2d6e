/**
 * Does a mirror equal the simulator's ground truth? Row by row: the workspace, every
 * location, every current SKU (fields, root quantities, leaf quantities with freshness and
 * the leaf's own fields, the stock_by_location view) and its complete history as a MULTISET
 * (rows identical in every field are each counted: every copy must be stored; issue 10 §1).
 *
 * One comparison for the bench (compareWithTruth: a count and the first few differences)
 * and the tests (test/helpers/ground-truth.ts re-exports diffAgainstTruth: every
 * difference). The rows come from src/store/mirror-rows.ts, read-only.
 */
import type { GroundTruth } from "../simulator/index.js";
import { readMirrorRows, type MirrorRows, type Row } from "../store/mirror-rows.js";

export { tableCounts } from "../store/mirror-rows.js";

/** A history row's fields in a fixed order, absent ones as null: equal strings are identical rows. */
export const historyTuple = (r: Row): string =>
  JSON.stringify([
    r.kind,
    r.occurredAt,
    r.direction ?? null,
    r.quantity,
    r.locationId,
    r.locationName ?? null,
    r.locationCode ?? null,
    r.eventId ?? null,
    r.eventTypeCode ?? null,
    r.eventTypeName ?? null,
    r.setSessionId ?? null,
    r.setTypeCode ?? null,
    r.observedQuantity ?? null,
    r.note ?? null,
  ]);

/** The same for a stored row (history table columns). */
const storedHistoryTuple = (h: Row): string =>
  historyTuple({
    kind: h.kind,
    occurredAt: h.occurred_at,
    direction: h.direction,
    quantity: h.quantity,
    locationId: h.location_id,
    locationName: h.location_name,
    locationCode: h.location_code,
    eventId: h.event_id,
    eventTypeCode: h.event_type_code,
    eventTypeName: h.event_type_name,
    setSessionId: h.set_session_id,
    setTypeCode: h.set_type_code,
    observedQuantity: h.observed_quantity,
    note: h.note,
  });

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

/** Collects a difference when `got` and `want` differ (compared as JSON). */
class Differences {
  readonly list: string[] = [];
  eq(what: string, got: unknown, want: unknown): void {
    if (JSON.stringify(got) !== JSON.stringify(want)) this.list.push(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
  add(message: string): void {
    this.list.push(message);
  }
}

/** Every difference between the mirror at `dbPath` and the ground truth (empty: equal). */
export function diffAgainstTruth(dbPath: string, truth: GroundTruth): string[] {
  const diffs = new Differences();
  readMirrorRows(dbPath, (rows) => {
    diffs.eq("workspace", rows.workspace(), [{ id: truth.workspace.workspace.id, name: truth.workspace.workspace.name, scope: truth.workspace.scope }]);
    compareLocations(rows, truth, diffs);
    const skus = new Map(rows.skus().map((r) => [r.id as string, r]));
    diffs.eq("current SKU count", skus.size, truth.skus.length);
    for (const t of truth.skus) compareSku(rows, skus, t, diffs);
  });
  return diffs.list;
}

/**
 * History rows the mirror holds that the server does not, for the SKUs both have (a multiset
 * difference per SKU: a copy the server has once, stored twice, counts), whatever the mirror still
 * lacks. A SKU the server removed since is left out: its rows were real. Empty: nothing invented.
 */
export function historyNotInTruth(dbPath: string, truth: GroundTruth): Array<{ skuId: string; extra: number }> {
  const want = new Map(truth.skus.map((t) => [t.item.id, (t.history as Row[]).map(historyTuple)]));
  return readMirrorRows(dbPath, (rows) =>
    rows.skus().flatMap((s) => {
      const id = s.id as string;
      const server = want.get(id);
      if (server === undefined) return [];
      const extra = multisetMinus(rows.history(id).map(storedHistoryTuple), server).length;
      return extra > 0 ? [{ skuId: id, extra }] : [];
    }),
  );
}

export interface TruthCheck {
  equal: boolean;
  differences: number;
  /** The first few differences, for the log. */
  sample: string[];
}

/** diffAgainstTruth as a bench reports it: the number of differences and the first few (each cut to 300 characters). */
export function compareWithTruth(dbPath: string, truth: GroundTruth): TruthCheck {
  const diffs = diffAgainstTruth(dbPath, truth);
  return { equal: diffs.length === 0, differences: diffs.length, sample: diffs.slice(0, 5).map((d) => d.slice(0, 300)) };
}

function compareLocations(rows: MirrorRows, truth: GroundTruth, diffs: Differences): void {
  const locs = new Map(rows.locations().map((r) => [r.id as string, r]));
  diffs.eq("location count", locs.size, truth.locations.length);
  for (const l of truth.locations as Row[]) {
    const r = locs.get(l.id as string);
    if (!r) {
      diffs.add(`location ${l.id} missing`);
      continue;
    }
    diffs.eq(
      `location ${l.id}`,
      [
        r.name,
        r.code,
        r.parent_id,
        r.parent_name,
        r.node_kind,
        r.depth,
        JSON.parse(r.path_ids as string),
        JSON.parse(r.path_names as string),
        r.display_path,
        r.is_leaf,
        r.child_count,
        r.selectable,
        r.status,
        r.updated_at,
      ],
      [l.name, l.code, l.parentId, l.parentName, l.nodeKind, l.depth, l.pathIds, l.pathNames, l.displayPath, l.isLeaf ? 1 : 0, l.childCount, l.selectable ? 1 : 0, l.status, l.updatedAt],
    );
  }
}

type TruthSku = GroundTruth["skus"][number];

function compareSku(rows: MirrorRows, skus: Map<string, Row>, t: TruthSku, diffs: Differences): void {
  const item = t.item as Row & { product?: Row; options?: Row; locationQuantities?: Record<string, number> };
  const id = item.id as string;
  const r = skus.get(id);
  if (!r) {
    diffs.add(`SKU ${id} missing`);
    return;
  }
  diffs.eq(
    `SKU ${id} fields`,
    [r.code, r.sku_code, r.name, r.barcode, r.unit, r.product_id, r.product_name, r.product_brand, JSON.parse(r.options as string), r.total_quantity],
    [item.code, item.skuCode, item.name, item.barcode, item.unit, item.product?.id, item.product?.name, item.product?.brand, item.options ?? {}, item.totalQuantity],
  );
  const wantRoots = Object.entries(item.locationQuantities ?? {})
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, v]) => ({ root_location_id: k, quantity: v }));
  diffs.eq(`SKU ${id} root quantities`, rows.rootQuantities(id), wantRoots);
  compareLeaves(rows, id, t, diffs);
  compareHistory(rows, id, t, diffs);
}

function compareLeaves(rows: MirrorRows, id: string, t: TruthSku, diffs: Differences): void {
  const detailLocs = ((t.detail as Row).locations as Row[]).slice().sort((a, b) => ((a.id as string) < (b.id as string) ? -1 : 1));
  diffs.eq(
    `SKU ${id} leaf quantities`,
    rows.leafQuantities(id),
    detailLocs.map((l) => {
      const f = (l.freshness ?? {}) as Row;
      return {
        location_id: l.id,
        quantity: l.quantity,
        freshness_status: f.status ?? null,
        freshness_last_replayed_at: f.lastReplayedAt ?? null,
        freshness_last_source_kind: f.lastSourceKind ?? null,
        location_name: l.name ?? null,
        location_code: l.code ?? null,
        parent_id: l.parentId ?? null,
      };
    }),
  );
  diffs.eq(
    `SKU ${id} stock_by_location`,
    rows.stockByLocation(id),
    detailLocs.map((l) => {
      const status = ((l.freshness ?? {}) as Row).status ?? null;
      return { location_id: l.id, quantity: l.quantity, freshness_status: status, scan_not_reflected: status === "clean" ? 0 : 1 };
    }),
  );
}

/** History as a multiset: the same rows, each copy counted. */
function compareHistory(rows: MirrorRows, id: string, t: TruthSku, diffs: Differences): void {
  const got = rows.history(id).map(storedHistoryTuple).sort();
  const want = (t.history as Row[]).map(historyTuple).sort();
  if (JSON.stringify(got) === JSON.stringify(want)) return;
  const missing = multisetMinus(want, got).length;
  const extra = multisetMinus(got, want).length;
  diffs.add(`SKU ${id} history: ${got.length} rows stored, ${want.length} in truth (${missing} missing, ${extra} extra)`);
}
