/**
 * `inventory-mirror reconcile`: is the mirror consistent with itself?
 *
 * Checks, for every current SKU:
 * - leaf_history: at each leaf, the replay of the mirrored history (from the latest SET's
 *   observed count plus the later movements; from 0 when there is no SET) equals the mirrored
 *   quantity. A difference at a leaf whose freshness is not clean is explained: the API says
 *   the latest scan may not be reflected there yet.
 * - root_sum: the SKU's leaf quantities under each root add up to the list's root quantity
 *   (locationQuantities, sku_root_quantities).
 * - sku_total: all its leaf quantities add up to the list's totalQuantity (skus.total_quantity).
 *
 * A root_sum or sku_total difference of a SKU whose detail is still queued (a partial or
 * running sync) is explained too: its list row is newer than its leaf rows.
 *
 * One wrong row shows up once: when a root_sum or sku_total difference is exactly the sum of
 * the unexplained leaf_history differences in its scope, the leaf rows are the cause and the
 * aggregate checks are listed on them (`alsoDisagrees`) instead of as separate mismatches.
 *
 * Advisory (never affects the result): the latest inventory snapshot's root and overall
 * totals against the leaf sums. The snapshot is taken at the start of a run, so a workspace
 * that changed during the run legitimately differs.
 */
import type { DB } from "../store/db.js";
import { applyRow, HISTORY_ORDER_SQL, reflectedCount, sameQuantity, timeOf, type ReplayRow } from "./replay.js";

export type CheckKind = "leaf_history" | "root_sum" | "sku_total";

export interface Mismatch {
  check: CheckKind;
  skuId: string;
  skuCode: string | null;
  skuName: string | null;
  /** The leaf (leaf_history), the root (root_sum), or null (sku_total). */
  locationId: string | null;
  locationName: string | null;
  displayPath: string | null;
  /** What the reference says: the history replay (leaf_history) or the list's quantity (root_sum, sku_total). */
  expected: number;
  /** What the mirror holds: the leaf quantity (leaf_history) or the sum of the leaf quantities. */
  found: number;
  /** found − expected. */
  difference: number;
  /** Freshness of the leaf (leaf_history only). */
  freshnessStatus: string | null;
  explainedByFreshness: boolean;
  /** root_sum / sku_total of a SKU whose detail is still queued (the list is newer than its leaf rows). */
  explainedByPendingFetch: boolean;
  /** Either of the above: does not fail the check. */
  explained: boolean;
  explanation: string;
  /** Aggregate checks that disagree by exactly this row's difference (this row is their cause). */
  alsoDisagrees: CheckKind[];
  /** leaf_history: history rows at this SKU × leaf, and when the latest SET among them occurred. */
  historyRows?: number;
  latestSetAt?: string | null;
  /** leaf_history at a non-clean leaf: the replay of only the rows up to freshness.lastReplayedAt. */
  replayUpToLastReplay?: number | null;
}

export interface Advisory {
  check: "snapshot_root_total" | "snapshot_total";
  runId: number;
  takenAt: string;
  rootId: string | null;
  rootName: string | null;
  /** The snapshot's total. */
  expected: number;
  /** The current sum of leaf quantities. */
  found: number;
  difference: number;
  explanation: string;
}

export interface ReconcileReport {
  ok: boolean;
  checkedAt: string;
  skuId: string | null;
  counts: { skus: number; skuLeaves: number; skuRoots: number; historyRows: number };
  unexplained: number;
  explained: number;
  mismatches: Mismatch[];
  advisories: Advisory[];
}

interface Leaf {
  locationId: string;
  quantity: number | null;
  status: string | null;
  replayedAt: string | null;
  name: string | null;
  replay: number;
  replayReflected: number;
  /** Non-clean leaves only: their rows, oldest first. */
  kept: Array<ReplayRow & { t: number }>;
  rows: number;
  latestSetAt: string | null;
}

type LocationRow = { id: string; name: string | null; display_path: string | null; status: string | null; deleted_at: string | null };
type SkuRow = { id: string; code: string | null; name: string | null; total_quantity: number | null; last_seen_at: string | null };

/** What reconcile reads from the mirror, once, for the SKUs it checks. */
interface MirrorState {
  skus: SkuRow[];
  locations: Map<string, LocationRow>;
  /** Leaf -> its root (live roots only). */
  rootOf: Map<string, string>;
  /** SKU -> leaf -> state. */
  leaves: Map<string, Map<string, Leaf>>;
  historyRows: number;
  /** SKUs whose detail + history are still to be fetched (queued, or never fetched). */
  pending: Set<string>;
  /** When each SKU's detail was last stored: the list row (root quantities, total) may be from another moment. */
  detailAt: Map<string, string>;
  /** SKU -> root -> the list's root quantity. */
  rootQty: Map<string, Map<string, number>>;
}

/** Leaf sums and unexplained leaf differences, per root and overall, for the advisories' folding. */
interface LeafTotals {
  sumByRoot: Map<string, number>;
  sumTotal: number;
  diffByRoot: Map<string, number>;
  diffTotal: number;
}

/** One SKU's checks. */
interface SkuCheck {
  leafMismatches: Mismatch[];
  aggregates: Mismatch[];
  /** Leaf quantity sums per root, and over all leaves. */
  sums: Map<string, number>;
  total: number;
  leaves: number;
  roots: number;
}

export function reconcile(db: DB, opts: { skuId?: string | null } = {}): ReconcileReport {
  const skuId = opts.skuId ?? null;
  const state = readMirrorState(db, skuId);
  const mismatches: Mismatch[] = [];
  const totals: LeafTotals = { sumByRoot: new Map(), sumTotal: 0, diffByRoot: new Map(), diffTotal: 0 };
  let skuLeaves = 0;
  let skuRoots = 0;
  for (const sku of state.skus) {
    const check = checkSku(sku, state);
    skuLeaves += check.leaves;
    skuRoots += check.roots;
    addToTotals(totals, check, state.rootOf);
    mismatches.push(...check.leafMismatches, ...check.aggregates);
  }

  const advisories = skuId === null ? snapshotAdvisories(db, totals.sumByRoot, totals.sumTotal, totals.diffByRoot, totals.diffTotal) : [];
  const unexplainedCount = mismatches.filter((m) => !m.explained).length;
  return {
    ok: unexplainedCount === 0,
    checkedAt: new Date().toISOString(),
    skuId,
    counts: { skus: state.skus.length, skuLeaves, skuRoots, historyRows: state.historyRows },
    unexplained: unexplainedCount,
    explained: mismatches.length - unexplainedCount,
    mismatches,
    advisories,
  };
}

function readMirrorState(db: DB, skuId: string | null): MirrorState {
  const params = skuId === null ? {} : { skuId };
  const skuJoin = (alias: string) => `JOIN skus s ON s.id = ${alias}.sku_id AND s.deleted_at IS NULL ${skuId === null ? "" : "AND s.id = @skuId"}`;
  const skus = db
    .prepare(`SELECT id, code, name, total_quantity, last_seen_at FROM skus WHERE deleted_at IS NULL ${skuId === null ? "" : "AND id = @skuId"} ORDER BY code, id`)
    .all(params) as SkuRow[];
  const locations = new Map((db.prepare("SELECT id, name, display_path, status, deleted_at FROM locations").all() as LocationRow[]).map((l) => [l.id, l]));
  const rootOf = new Map(
    (
      db
        .prepare(`SELECT a.location_id, a.ancestor_id FROM location_ancestors a JOIN locations r ON r.id = a.ancestor_id AND r.deleted_at IS NULL
      WHERE a.ancestor_depth = 0`)
        .all() as Array<{ location_id: string; ancestor_id: string }>
    ).map((r) => [r.location_id, r.ancestor_id]),
  );
  const leaves = new Map<string, Map<string, Leaf>>();
  readLeafQuantities(db, skuJoin("q"), params, leaves);
  const historyRows = replayLeafHistory(db, skuJoin("h"), params, leaves);
  const pending = new Set((db.prepare("SELECT sku_id FROM sku_sync WHERE pending_walk_id IS NOT NULL OR fetched_at IS NULL").all() as Array<{ sku_id: string }>).map((r) => r.sku_id));
  const detailAt = new Map(
    (db.prepare("SELECT sku_id, fetched_at FROM sku_sync WHERE fetched_at IS NOT NULL").all() as Array<{ sku_id: string; fetched_at: string }>).map((r) => [r.sku_id, r.fetched_at]),
  );
  const rootQty = readRootQuantities(db, skuJoin("r"), params);
  return { skus, locations, rootOf, leaves, historyRows, pending, detailAt, rootQty };
}

/** The leaf of SKU `s` at location `l`, created empty on first use. */
function leafOf(leaves: Map<string, Map<string, Leaf>>, s: string, l: string): Leaf {
  let m = leaves.get(s);
  if (!m) leaves.set(s, (m = new Map()));
  let leaf = m.get(l);
  if (!leaf) {
    leaf = { locationId: l, quantity: null, status: null, replayedAt: null, name: null, replay: 0, replayReflected: 0, kept: [], rows: 0, latestSetAt: null };
    m.set(l, leaf);
  }
  return leaf;
}

/** The mirrored quantity and freshness of every SKU × leaf. */
function readLeafQuantities(db: DB, skuJoin: string, params: object, leaves: Map<string, Map<string, Leaf>>): void {
  for (const q of db
    .prepare(`SELECT q.sku_id, q.location_id, q.quantity, q.freshness_status, q.freshness_last_replayed_at, q.location_name
      FROM sku_location_quantities q ${skuJoin}`)
    .iterate(params) as Iterable<{ sku_id: string; location_id: string; quantity: number; freshness_status: string | null; freshness_last_replayed_at: string | null; location_name: string | null }>) {
    const leaf = leafOf(leaves, q.sku_id, q.location_id);
    leaf.quantity = q.quantity;
    leaf.status = q.freshness_status;
    leaf.replayedAt = q.freshness_last_replayed_at;
    leaf.name = q.location_name;
  }
}

/** Replays every SKU × leaf's mirrored history, oldest first, into its leaf; returns the rows read. */
function replayLeafHistory(db: DB, skuJoin: string, params: object, leaves: Map<string, Map<string, Leaf>>): number {
  let historyRows = 0;
  for (const h of db
    .prepare(`SELECT h.sku_id, h.location_id, h.occurred_at, h.kind, h.direction, h.quantity, h.observed_quantity
      FROM history h ${skuJoin} ORDER BY h.sku_id, h.location_id, ${HISTORY_ORDER_SQL}`)
    .iterate(params) as Iterable<ReplayRow & { sku_id: string; location_id: string; occurred_at: string }>) {
    historyRows++;
    const leaf = leafOf(leaves, h.sku_id, h.location_id);
    leaf.rows++;
    leaf.replay = applyRow(leaf.replay, h);
    if (leaf.quantity !== null && leaf.status !== "clean") {
      leaf.kept.push({ kind: h.kind, direction: h.direction, quantity: h.quantity, observed_quantity: h.observed_quantity, t: timeOf(h.occurred_at) });
    }
    if (h.kind === "set") leaf.latestSetAt = h.occurred_at;
  }
  return historyRows;
}

function readRootQuantities(db: DB, skuJoin: string, params: object): Map<string, Map<string, number>> {
  const rootQty = new Map<string, Map<string, number>>();
  for (const r of db.prepare(`SELECT r.sku_id, r.root_location_id, r.quantity FROM sku_root_quantities r ${skuJoin}`).iterate(params) as Iterable<{
    sku_id: string;
    root_location_id: string;
    quantity: number;
  }>) {
    let m = rootQty.get(r.sku_id);
    if (!m) rootQty.set(r.sku_id, (m = new Map()));
    m.set(r.root_location_id, r.quantity);
  }
  return rootQty;
}

/** The leaf_history checks of one SKU, then its root_sum and sku_total checks (folded onto leaf rows that explain them). */
function checkSku(sku: SkuRow, state: MirrorState): SkuCheck {
  const base = { skuId: sku.id, skuCode: sku.code, skuName: sku.name };
  const skuLeafMap = state.leaves.get(sku.id) ?? new Map<string, Leaf>();
  const leafMismatches: Mismatch[] = [];
  const sums = new Map<string, number>();
  let total = 0;
  for (const leaf of skuLeafMap.values()) {
    const found = leaf.quantity ?? 0;
    if (leaf.quantity !== null) {
      total += found;
      const root = state.rootOf.get(leaf.locationId);
      if (root !== undefined) sums.set(root, (sums.get(root) ?? 0) + found);
    }
    const mismatch = leafHistoryMismatch(base, leaf, state.locations);
    if (mismatch) leafMismatches.push(mismatch);
  }
  const unexplained = leafMismatches.filter((m) => !m.explained);
  const explain = aggregateExplainer(sku, state);
  const queued = state.pending.has(sku.id);
  const aggregates: Mismatch[] = [];
  const rootQty = state.rootQty.get(sku.id);
  const roots = new Set<string>([...sums.keys(), ...(rootQty?.keys() ?? [])]);
  for (const root of roots) {
    const m = rootSumMismatch(base, root, sums.get(root) ?? 0, rootQty?.get(root) ?? 0, queued, explain, state.locations);
    if (
      m &&
      !fold(
        m,
        unexplained.filter((u) => state.rootOf.get(u.locationId!) === root),
      )
    )
      aggregates.push(m);
  }
  if (sku.total_quantity !== null && !sameQuantity(total, sku.total_quantity)) {
    const m: Mismatch = {
      check: "sku_total",
      ...base,
      locationId: null,
      locationName: null,
      displayPath: null,
      expected: sku.total_quantity,
      found: total,
      difference: total - sku.total_quantity,
      freshnessStatus: null,
      explainedByFreshness: false,
      explainedByPendingFetch: queued,
      explained: queued,
      explanation: explain("the SKU's leaf quantities do not add up to the list's totalQuantity"),
      alsoDisagrees: [],
    };
    if (!fold(m, unexplained)) aggregates.push(m);
  }
  return { leafMismatches, aggregates, sums, total, leaves: skuLeafMap.size, roots: roots.size };
}

/** The leaf_history mismatch of one leaf, or null when the replay equals the mirrored quantity. */
function leafHistoryMismatch(base: { skuId: string; skuCode: string | null; skuName: string | null }, leaf: Leaf, locations: Map<string, LocationRow>): Mismatch | null {
  const found = leaf.quantity ?? 0;
  if (sameQuantity(found, leaf.replay)) return null;
  const notClean = leaf.quantity !== null && leaf.status !== "clean";
  const loc = locations.get(leaf.locationId);
  if (notClean) {
    const n = reflectedCount({ rows: leaf.kept, replayedAt: timeOf(leaf.replayedAt), current: found });
    leaf.replayReflected = leaf.kept.slice(0, n).reduce(applyRow, 0);
  }
  const lagging = notClean && leaf.rows > 0 && sameQuantity(found, leaf.replayReflected);
  const unqueried = leaf.quantity === null ? notQueriedForStock(loc) : null;
  const explained = notClean || unqueried !== null;
  return {
    check: "leaf_history",
    ...base,
    locationId: leaf.locationId,
    locationName: loc?.name ?? leaf.name,
    displayPath: loc?.display_path ?? null,
    expected: leaf.replay,
    found,
    difference: found - leaf.replay,
    freshnessStatus: leaf.status,
    explainedByFreshness: notClean,
    explainedByPendingFetch: false,
    explained,
    explanation: notClean
      ? `freshness is ${leaf.status ?? "missing"}: the latest scan may not be reflected yet` + (lagging ? ` (the quantity equals the replay up to the last replay at ${leaf.replayedAt})` : "")
      : unqueried !== null
        ? `the history implies stock at a leaf the SKU has no quantity row for; the leaf ${unqueried}, and the detail reports stock at active leaves only`
        : leaf.quantity === null
          ? "the history implies stock at a leaf the SKU has no quantity row for"
          : leaf.rows === 0
            ? "no history row explains this quantity"
            : "the replay of the mirrored history differs from the mirrored quantity",
    alsoDisagrees: [],
    historyRows: leaf.rows,
    latestSetAt: leaf.latestSetAt,
    replayUpToLastReplay: notClean ? leaf.replayReflected : null,
  };
}

/**
 * Why the detail cannot report stock at this leaf, or null when it can: the document queries stock at locations
 * whose status is `active`, so a leaf made inactive (or archived) keeps its history and leaves the detail, and so
 * does one gone from the locations tree. Said as the end of a sentence ("the leaf ...").
 */
function notQueriedForStock(loc: LocationRow | undefined): string | null {
  if (loc === undefined) return null;
  if (loc.deleted_at !== null) return `is no longer in the locations tree (since ${loc.deleted_at})`;
  if (loc.status !== null && loc.status !== "active") return `has status ${JSON.stringify(loc.status)}, not "active"`;
  return null;
}

/** Adds to an aggregate check's text why its list row may be newer than its leaf rows (queued, or read apart). */
function aggregateExplainer(sku: SkuRow, state: MirrorState): (what: string) => string {
  const queued = state.pending.has(sku.id);
  const detailAt = state.detailAt.get(sku.id) ?? null;
  const apart = readApart(sku.last_seen_at, detailAt);
  return (what) =>
    queued
      ? `${what}; the SKU's detail is still queued for fetching (sku_sync), so its leaf rows are older than its list row`
      : apart
        ? `${what}; the list row was read at ${sku.last_seen_at} and the detail at ${detailAt}, ${apart} apart: stock that moved in between shows as this difference (the next sync reads both again)`
        : what;
}

/** The root_sum mismatch of one SKU × root, or null when the leaf sum equals the list's root quantity. */
function rootSumMismatch(
  base: { skuId: string; skuCode: string | null; skuName: string | null },
  root: string,
  found: number,
  expected: number,
  queued: boolean,
  explain: (what: string) => string,
  locations: Map<string, LocationRow>,
): Mismatch | null {
  if (sameQuantity(found, expected)) return null;
  const loc = locations.get(root);
  return {
    check: "root_sum",
    ...base,
    locationId: root,
    locationName: loc?.name ?? null,
    displayPath: loc?.display_path ?? null,
    expected,
    found,
    difference: found - expected,
    freshnessStatus: null,
    explainedByFreshness: false,
    explainedByPendingFetch: queued,
    explained: queued,
    explanation: explain("the SKU's leaf quantities under this root do not add up to the list's root quantity"),
    alsoDisagrees: [],
  };
}

/** Adds one SKU's leaf sums and unexplained leaf differences to the totals the advisories compare with. */
function addToTotals(totals: LeafTotals, check: SkuCheck, rootOf: Map<string, string>): void {
  for (const m of check.leafMismatches) {
    if (m.explained) continue;
    const root = rootOf.get(m.locationId!);
    if (root !== undefined) totals.diffByRoot.set(root, (totals.diffByRoot.get(root) ?? 0) + m.difference);
    totals.diffTotal += m.difference;
  }
  for (const [root, q] of check.sums) totals.sumByRoot.set(root, (totals.sumByRoot.get(root) ?? 0) + q);
  totals.sumTotal += check.total;
}

/** If the aggregate's difference is exactly the leaf rows' differences, credit it to them. */
function fold(aggregate: Mismatch, cause: Mismatch[]): boolean {
  if (cause.length === 0) return false;
  const sum = cause.reduce((n, m) => n + m.difference, 0);
  if (!sameQuantity(sum, aggregate.difference)) return false;
  for (const m of cause) m.alsoDisagrees.push(aggregate.check);
  return true;
}

function snapshotAdvisories(db: DB, sumByRoot: Map<string, number>, sumTotal: number, diffByRoot: Map<string, number>, diffTotal: number): Advisory[] {
  const latest = db.prepare("SELECT max(run_id) AS run FROM inventory_snapshots").get() as { run: number | null };
  if (latest.run === null) return [];
  const rows = db.prepare("SELECT run_id, taken_at, root_id, name, total_quantity FROM inventory_snapshots WHERE run_id = ? AND total_quantity IS NOT NULL").all(latest.run) as Array<{
    run_id: number;
    taken_at: string;
    root_id: string | null;
    name: string | null;
    total_quantity: number;
  }>;
  const out: Advisory[] = [];
  for (const r of rows) {
    const found = r.root_id === null ? sumTotal : (sumByRoot.get(r.root_id) ?? 0);
    const difference = found - r.total_quantity;
    if (sameQuantity(found, r.total_quantity)) continue;
    // Already accounted for by leaf rows reported above.
    if (sameQuantity(difference, r.root_id === null ? diffTotal : (diffByRoot.get(r.root_id) ?? 0))) continue;
    out.push({
      check: r.root_id === null ? "snapshot_total" : "snapshot_root_total",
      runId: r.run_id,
      takenAt: r.taken_at,
      rootId: r.root_id,
      rootName: r.name,
      expected: r.total_quantity,
      found,
      difference,
      explanation: `the list's ${r.root_id === null ? "overall" : "root"} total at ${r.taken_at} (run ${r.run_id}) differs from today's leaf sum; expected if stock changed during or after that run`,
    });
  }
  return out;
}

/** How far apart (text) the list row and the detail were read, or null when within a second (read together). */
function readApart(listAt: string | null, detailAt: string | null): string | null {
  if (!listAt || !detailAt) return null;
  const ms = Math.abs(Date.parse(listAt) - Date.parse(detailAt));
  if (!Number.isFinite(ms) || ms < 1_000) return null;
  return ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : ms < 7_200_000 ? `${(ms / 60_000).toFixed(1)} min` : `${(ms / 3_600_000).toFixed(1)} h`;
}
