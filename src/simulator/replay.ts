/**
 * The replay rule, in one place: the generator, every mutation and the invariants all
 * derive a projection from the stored rows with this code, so "quantity = replay of the
 * reflected rows" holds by construction rather than by bookkeeping.
 *
 * Rule: start at 0; a movement adds its signed delta; a SET sets the balance to its
 * observed count, and its stored delta is rewritten to (observed − balance just before),
 * which keeps "SET quantity = observed − prior balance" true even after a late row is
 * inserted ahead of it.
 */
import type { Projection, Row, SkuState } from "./types.js";

export interface NegativeBalance {
  leaf: number;
  t: number;
  balance: number;
}

/**
 * Recompute the projections of `sku` at the given leaves (all leaves with rows when
 * omitted). Creates a clean projection for a leaf that has rows but none yet. Returns the
 * first point where a leaf's true balance would go negative, or null.
 */
export function replay(sku: SkuState, leaves?: Iterable<number>, leafRank?: Int32Array): NegativeBalance | null {
  const only = leaves ? new Set(leaves) : null;
  const byLeaf = new Map<number, Row[]>();
  if (only) for (const leaf of only) byLeaf.set(leaf, []);
  for (const row of sku.rows) {
    if (only && !only.has(row.leaf)) continue;
    let list = byLeaf.get(row.leaf);
    if (!list) byLeaf.set(row.leaf, (list = []));
    list.push(row);
  }
  let negative: NegativeBalance | null = null;
  for (const [leaf, rows] of byLeaf) {
    let proj = sku.projections.find((p) => p.leaf === leaf);
    if (!proj) {
      if (rows.length === 0) continue;
      proj = cleanProjection(leaf);
      insertProjection(sku, proj, leafRank);
    }
    const neg = replayLeafRows(proj, rows);
    if (neg && !negative) negative = neg;
  }
  return negative;
}

export function cleanProjection(leaf: number): Projection {
  return {
    leaf,
    status: "clean",
    unreflected: 0,
    quantity: 0,
    lastReplayedAt: null,
    lastSourceKind: null,
    rowCount: 0,
    balance: 0,
  };
}

/** Keep `projections` sorted by leaf id (the detail endpoint's order). */
export function insertProjection(sku: SkuState, proj: Projection, leafRank?: Int32Array): void {
  const rank = (leaf: number): number => (leafRank ? (leafRank[leaf] ?? leaf) : leaf);
  const r = rank(proj.leaf);
  let i = sku.projections.length;
  while (i > 0 && rank(sku.projections[i - 1]!.leaf) > r) i--;
  sku.projections.splice(i, 0, proj);
}

/** Replay one leaf's rows (chronological) into its projection. */
function replayLeafRows(proj: Projection, rows: readonly Row[]): NegativeBalance | null {
  if (proj.status === "clean") proj.unreflected = 0;
  if (proj.unreflected > rows.length) proj.unreflected = rows.length;
  const reflected = rows.length - proj.unreflected;
  let balance = 0;
  let negative: NegativeBalance | null = null;
  proj.quantity = 0;
  proj.lastReplayedAt = null;
  proj.lastSourceKind = null;
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    if (row.kind === "set") {
      row.delta = row.amount - balance;
      balance = row.amount;
    } else {
      balance += row.delta;
    }
    if (balance < 0 && !negative) negative = { leaf: proj.leaf, t: row.t, balance };
    if (i === reflected - 1) {
      proj.quantity = balance;
      proj.lastReplayedAt = row.t;
      proj.lastSourceKind = row.kind === "set" ? "set" : "event";
    }
  }
  proj.balance = balance;
  proj.rowCount = rows.length;
  return negative;
}

/** Chronological order of rows: occurredAt, then insertion sequence. */
function compareRows(a: Pick<Row, "t" | "seq">, b: Pick<Row, "t" | "seq">): number {
  return a.t - b.t || a.seq - b.seq;
}

/** Index at which `row` keeps `rows` chronological. */
export function insertionIndex(rows: readonly Row[], row: Pick<Row, "t" | "seq">): number {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareRows(rows[mid]!, row) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
