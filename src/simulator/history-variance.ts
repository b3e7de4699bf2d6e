/**
 * History shapes the API document allows and the default dataset does not show (issue 10):
 * rows identical in every field (one event with two equal lines) and long runs of rows
 * sharing one occurredAt. Applied to fixed SKUs at generation, deterministically, so a test
 * knows where to look: model options `identicalRows` and `tieRuns` (profiles.ts names them).
 *
 * SKU roles, by creation ordinal (0-2 have fixed roles in generate.ts):
 * - 3 .. 3+identicalRows-1: a pair of identical receipts, placements cycling through
 *   "page" (both near the newest end of page one: inside one page, and inside an incremental
 *   walk's overlap window), "boundary" (rows 100 and 101 newest first: split by a page
 *   boundary at limit 100) and "ties" (in the middle of a run of 150 rows sharing occurredAt).
 * - the next `tieRuns` SKUs: a run of ties over most of their rows, across page boundaries.
 */
import type { Rng } from "./prng.js";
import type { Row, SkuState, WorkspaceState } from "./types.js";

export type PairPlacement = "page" | "boundary" | "ties";
const PAIR_PLACEMENTS: readonly PairPlacement[] = ["page", "boundary", "ties"];

export interface HistoryVarianceOptions {
  /** SKUs given a pair of identical history rows (placements cycle through PAIR_PLACEMENTS). */
  identicalRows: number;
  /** SKUs given a long run of rows sharing one occurredAt. */
  tieRuns: number;
}

export type HistoryRole = { kind: "pair"; placement: PairPlacement } | { kind: "ties" };

/** First SKU ordinal free of generate.ts's fixed roles. */
const FIRST_FREE_IDX = 3;
/** Newest-first position (0-based) of the newer copy: near the top of page one. */
const PAGE_POSITION = 2;
/** Rows 100 and 101 (1-based, newest first): the first page at limit 100 ends between them. */
const BOUNDARY_POSITION = 99;
/** A tie run covers these newest-first positions; the pair sits in its middle. */
const TIE_RUN = { from: 40, to: 190 } as const;
const TIE_PAIR_POSITION = 120;
/** The quantity on each identical line (the example). */
const PAIR_QUANTITY = 17;

export function historyRole(idx: number, o: HistoryVarianceOptions): HistoryRole | null {
  const i = idx - FIRST_FREE_IDX;
  if (i < 0) return null;
  if (i < o.identicalRows) return { kind: "pair", placement: PAIR_PLACEMENTS[i % PAIR_PLACEMENTS.length]! };
  if (i < o.identicalRows + o.tieRuns) return { kind: "ties" };
  return null;
}

export function assertVarianceFits(o: HistoryVarianceOptions & { skus: number; historyDepth: number }): void {
  for (const [name, v] of [
    ["identicalRows", o.identicalRows],
    ["tieRuns", o.tieRuns],
  ] as const) {
    if (!Number.isInteger(v) || v < 0) throw new RangeError(`${name} must be an integer >= 0, got ${v}`);
  }
  const needed = o.identicalRows + o.tieRuns;
  if (needed > 0 && (o.skus < FIRST_FREE_IDX + needed || o.historyDepth <= 0)) {
    throw new RangeError(`identicalRows + tieRuns = ${needed} needs skus >= ${FIRST_FREE_IDX + needed} and historyDepth > 0 (got ${o.skus}, ${o.historyDepth})`);
  }
}

/** Rows the role needs generated before it is applied (null: the usual target). */
export function roleTarget(role: HistoryRole | null, rng: Rng): number | null {
  if (!role) return null;
  if (role.kind === "ties" || role.placement === "ties") return rng.range(TIE_RUN.to + 20, TIE_RUN.to + 60);
  if (role.placement === "boundary") return rng.range(BOUNDARY_POSITION + 30, BOUNDARY_POSITION + 80);
  return rng.range(PAGE_POSITION + 6, 40);
}

/** Reshape a SKU's generated rows (chronological) for its role; rows are renumbered so (t, seq) stays their order. */
export function applyHistoryRole(state: WorkspaceState, sku: SkuState, role: HistoryRole | null): void {
  if (!role || sku.rows.length === 0) return;
  if (role.kind === "ties" || role.placement === "ties") flattenTies(sku.rows, TIE_RUN.from, TIE_RUN.to);
  if (role.kind === "pair") {
    const p = role.placement === "page" ? PAGE_POSITION : role.placement === "boundary" ? BOUNDARY_POSITION : TIE_PAIR_POSITION;
    insertIdenticalPair(sku, Math.min(p, sku.rows.length));
  }
  for (const r of sku.rows) r.seq = state.nextSeq++;
}

/** The rows at newest-first positions [from, to] all take the oldest one's occurredAt (order unchanged). */
function flattenTies(rows: Row[], from: number, to: number): void {
  const n = rows.length;
  const lo = Math.max(0, n - 1 - to);
  const hi = n - 1 - Math.min(from, n - 1);
  for (let i = lo + 1; i <= hi; i++) rows[i]!.t = rows[lo]!.t;
}

/**
 * Two receipts identical in every field (one event, one occurredAt, the same leaf, quantity
 * and note), the newer at newest-first position `p` and the older right below it. A receipt
 * never drives a balance negative; later SETs' deltas are recomputed by the replay after.
 */
function insertIdenticalPair(sku: SkuState, p: number): void {
  const rows = sku.rows;
  const k = rows.length - p;
  const near = rows[Math.max(0, k - 1)]!;
  const ref = sku.nextRef++;
  const copy = (): Row => ({ seq: 0, t: near.t, leaf: near.leaf, kind: "movement", type: "receipt", amount: PAIR_QUANTITY, delta: PAIR_QUANTITY, ref, note: "Two identical lines" });
  rows.splice(k, 0, copy(), copy());
}
