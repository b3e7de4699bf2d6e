/**
 * The replay rules every analysis shares with the history_timeline view
 * (migrations/0003_analysis.sql), in one place. docs/schema.md ("Assumptions") explains them.
 *
 * - Signed effect of a row: `signedDelta` (direction 'out' subtracts |quantity|, 'in' adds
 *   |quantity|, otherwise the stored quantity as is).
 * - A SET row with an observed count resets the balance to that count. Undoing it gives
 *   observed − delta, the balance just before (the API's delta is "against the projection
 *   just before").
 * - Order of the rows of one SKU × leaf: occurred_at, then the run that first stored the row
 *   (an earlier run's row is older), then the server's order within one fetch: the store
 *   inserts a SKU's history as returned, newest first, so a larger rowid is older.
 */
import { signedDelta } from "../core/api-schemas.js";

/** ORDER BY terms for history rows of one SKU × leaf, oldest first (table alias `h`). */
export const HISTORY_ORDER_SQL = "h.occurred_at, coalesce(h.first_seen_run_id, 0), h.rowid DESC";

export interface ReplayRow {
  kind: string;
  direction: string | null;
  quantity: number;
  observed_quantity: number | null;
}

function resets(r: ReplayRow): boolean {
  return r.kind === "set" && r.observed_quantity !== null;
}

function delta(r: ReplayRow): number {
  return signedDelta({ direction: r.direction, quantity: r.quantity });
}

/** The balance after `r`, given the balance before it. */
export function applyRow(before: number, r: ReplayRow): number {
  return resets(r) ? (r.observed_quantity as number) : before + delta(r);
}

/** The balance before `r`, given the balance after it. */
export function undoRow(after: number, r: ReplayRow): number {
  return resets(r) ? (r.observed_quantity as number) - delta(r) : after - delta(r);
}

/** Equal up to float noise (quantities are REAL; sums of decimals may differ in the last bits). */
export function sameQuantity(a: number, b: number): boolean {
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

/** Parse an API timestamp to epoch ms; NaN when it is not one. */
export function timeOf(iso: string | null): number {
  return iso === null ? Number.NaN : Date.parse(iso);
}

/**
 * The lower bound, as an occurred_at string prefix, of rows that may be later than `ms`:
 * every canonical timestamp (YYYY-MM-DDTHH:MM:SS[.sss]Z) in that second or after sorts at or
 * above it. Rows are then compared exactly with `timeOf`.
 */
export function secondPrefix(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19);
}

/**
 * How many of a non-clean leaf's rows (all of them, oldest first) its quantity reflects.
 * Rows before freshness.lastReplayedAt are reflected and rows after it are not. Several rows
 * may share that very instant, and only some of them be reflected: among those splits, the
 * one whose replay equals the current quantity is taken; when none does (or the history is
 * incomplete), all rows at that instant count as reflected.
 */
export function reflectedCount(k: { rows: Array<ReplayRow & { t: number }>; replayedAt: number; current: number }): number {
  const rows = k.rows;
  let before = 0;
  while (before < rows.length && rows[before]!.t < k.replayedAt) before++;
  let tiedEnd = before;
  while (tiedEnd < rows.length && rows[tiedEnd]!.t === k.replayedAt) tiedEnd++;
  if (tiedEnd - before < 2) return tiedEnd;
  let balance = 0;
  for (let i = 0; i < before; i++) balance = applyRow(balance, rows[i]!);
  for (let n = before + 1; n <= tiedEnd; n++) {
    balance = applyRow(balance, rows[n - 1]!);
    if (sameQuantity(balance, k.current)) return n;
  }
  return tiedEnd;
}
