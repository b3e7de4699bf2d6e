/**
 * Stock as of a past moment, per SKU × leaf, reconstructed from the mirrored current
 * quantities and history (`inventory-mirror stock --at T`).
 *
 * For each SKU × leaf: start from the current quantity; at a leaf whose freshness is not
 * clean, first apply the rows newer than freshness.lastReplayedAt (the quantity does not
 * reflect them yet), giving the balance the history implies now; then undo, newest first,
 * every row that occurred after T (a movement: subtract its signed effect; a SET: observed −
 * delta). Rows at exactly T count as having happened by T.
 *
 * Only the rows after T (and, at non-clean leaves, after the last replay) are read, so a
 * recent T is cheap and no history older than T is needed.
 */
import { ConfigError } from "../core/errors.js";
import type { DB } from "../store/db.js";
import { applyRow, HISTORY_ORDER_SQL, reflectedCount, sameQuantity, secondPrefix, timeOf, undoRow, type ReplayRow } from "./replay.js";

export interface StockAtOptions {
  /** Epoch ms. */
  at: number;
  /** A root, section or leaf id: only leaves under it (sums per SKU are given too). */
  locationId?: string | null;
  /** Only this SKU. */
  skuId?: string | null;
}

export interface StockAtLeaf {
  skuId: string;
  skuCode: string | null;
  skuName: string | null;
  locationId: string;
  locationName: string | null;
  displayPath: string | null;
  /** Quantity at `at`. */
  quantity: number;
  /** The mirrored quantity now (0 when the SKU has no row at this leaf any more). */
  currentQuantity: number;
  /** History rows after `at` that were undone. */
  rowsUndone: number;
  /** The leaf's freshness is not clean now: rows after its last replay were assumed unreflected. */
  approximate: boolean;
}

export interface StockAtSku {
  skuId: string;
  skuCode: string | null;
  skuName: string | null;
  quantity: number;
  leaves: number;
}

export interface StockAtResult {
  at: string;
  location: { id: string; name: string | null; displayPath: string | null; depth: number | null; leaves: number } | null;
  skuId: string | null;
  /** Non-zero quantities per SKU × leaf, by SKU code then display path. */
  leaves: StockAtLeaf[];
  /** The same summed per SKU (non-zero sums only). */
  skus: StockAtSku[];
  total: number;
}

interface Key {
  skuId: string;
  locationId: string;
  current: number;
  hasRow: boolean;
  notClean: boolean;
  replayedAt: number;
  rows: Array<ReplayRow & { t: number }>;
}

type InScope = ((locationId: string) => boolean) | null;

const keyOf = (s: string, l: string) => `${s}\u0000${l}`;

export function stockAt(db: DB, opts: StockAtOptions): StockAtResult {
  if (!Number.isFinite(opts.at)) throw new ConfigError("the timestamp is not a valid date");
  const at = opts.at;
  const skuId = opts.skuId ?? null;

  if (skuId !== null && !db.prepare("SELECT 1 FROM skus WHERE id = ? AND deleted_at IS NULL").get(skuId)) {
    throw new ConfigError(`no current SKU with id ${skuId} in this database`);
  }
  const { location, inScope } = opts.locationId ? locationScope(db, opts.locationId) : { location: null, inScope: null };
  const keys = readCurrentQuantities(db, skuId, inScope);
  readUnreflectedRows(db, keys);
  readRowsAfter(db, at, skuId, inScope, keys);
  const leaves = leavesAt(db, keys.values(), at);
  const skus = sumPerSku(leaves);
  return { at: new Date(at).toISOString(), location, skuId, leaves, skus, total: leaves.reduce((n, l) => n + l.quantity, 0) };
}

/** The location `--location` names, with its leaf count, and a test for the locations under it (itself included). */
function locationScope(db: DB, locationId: string): { location: StockAtResult["location"]; inScope: InScope } {
  // UUIDs are case-insensitive (RFC 9562): an id typed in lower case finds one a server sends in upper case.
  const loc = db.prepare("SELECT id, name, display_path, depth FROM locations WHERE id = ? COLLATE NOCASE AND deleted_at IS NULL").get(locationId) as
    | { id: string; name: string | null; display_path: string | null; depth: number | null }
    | undefined;
  if (!loc) throw new ConfigError(`no current location with id ${locationId} in this database (see the locations table)`);
  const under = new Set((db.prepare("SELECT location_id FROM location_ancestors WHERE ancestor_id = ?").all(loc.id) as Array<{ location_id: string }>).map((r) => r.location_id));
  under.add(loc.id);
  const leafCount = (
    db
      .prepare(`SELECT count(*) AS n FROM location_ancestors a JOIN locations l ON l.id = a.location_id
      WHERE a.ancestor_id = ? AND l.is_leaf = 1 AND l.deleted_at IS NULL`)
      .get(loc.id) as { n: number }
  ).n;
  return {
    location: { id: loc.id, name: loc.name, displayPath: loc.display_path, depth: loc.depth, leaves: leafCount },
    inScope: (id) => under.has(id),
  };
}

/** One key per current SKU × leaf in scope, holding its mirrored quantity and freshness. */
function readCurrentQuantities(db: DB, skuId: string | null, inScope: InScope): Map<string, Key> {
  const keys = new Map<string, Key>();
  const skuFilter = skuId === null ? "" : "AND q.sku_id = @skuId";
  const current = db
    .prepare(`SELECT q.sku_id, q.location_id, q.quantity, q.freshness_status, q.freshness_last_replayed_at
      FROM sku_location_quantities q JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL WHERE 1 ${skuFilter}`)
    .all(skuId === null ? {} : { skuId }) as Array<{
    sku_id: string;
    location_id: string;
    quantity: number;
    freshness_status: string | null;
    freshness_last_replayed_at: string | null;
  }>;
  for (const c of current) {
    if (inScope && !inScope(c.location_id)) continue;
    keys.set(keyOf(c.sku_id, c.location_id), {
      skuId: c.sku_id,
      locationId: c.location_id,
      current: c.quantity,
      hasRow: true,
      notClean: c.freshness_status !== "clean",
      replayedAt: timeOf(c.freshness_last_replayed_at),
      rows: [],
    });
  }
  return keys;
}

/** Non-clean leaves: every row (the unreflected ones may be older than `at`). */
function readUnreflectedRows(db: DB, keys: Map<string, Key>): void {
  const allRows = db.prepare(`SELECT h.occurred_at, h.kind, h.direction, h.quantity, h.observed_quantity FROM history h
    WHERE h.sku_id = ? AND h.location_id = ? ORDER BY ${HISTORY_ORDER_SQL}`);
  for (const k of keys.values()) {
    if (!k.notClean) continue;
    k.rows = (allRows.all(k.skuId, k.locationId) as Array<ReplayRow & { occurred_at: string }>).map((r) => ({ ...r, t: timeOf(r.occurred_at) }));
  }
}

/** Everywhere else: only rows after `at` (a SKU × leaf with history but no quantity row now gets a key holding 0). */
function readRowsAfter(db: DB, at: number, skuId: string | null, inScope: InScope, keys: Map<string, Key>): void {
  const histSkuFilter = skuId === null ? "" : "AND h.sku_id = @skuId";
  const later = db.prepare(`SELECT h.sku_id, h.location_id, h.occurred_at, h.kind, h.direction, h.quantity, h.observed_quantity
    FROM history h JOIN skus s ON s.id = h.sku_id AND s.deleted_at IS NULL
    WHERE h.occurred_at >= @from ${histSkuFilter}
    ORDER BY h.sku_id, h.location_id, ${HISTORY_ORDER_SQL}`);
  for (const r of later.iterate({ from: secondPrefix(at), ...(skuId === null ? {} : { skuId }) }) as Iterable<ReplayRow & { sku_id: string; location_id: string; occurred_at: string }>) {
    if (inScope && !inScope(r.location_id)) continue;
    const t = timeOf(r.occurred_at);
    if (!(t > at)) continue;
    const id = keyOf(r.sku_id, r.location_id);
    let k = keys.get(id);
    if (!k) {
      // History at a leaf the SKU has no quantity row for now: it holds 0 there now.
      k = { skuId: r.sku_id, locationId: r.location_id, current: 0, hasRow: false, notClean: false, replayedAt: Number.NaN, rows: [] };
      keys.set(id, k);
    }
    if (k.notClean) continue;
    k.rows.push({ kind: r.kind, direction: r.direction, quantity: r.quantity, observed_quantity: r.observed_quantity, t });
  }
}

/** One key's balance at `at`: the unreflected rows applied, then every row after `at` undone, newest first. */
function balanceAt(k: Key, at: number): { balance: number; undone: number } {
  let balance = k.current;
  if (k.notClean) {
    for (let i = reflectedCount(k); i < k.rows.length; i++) balance = applyRow(balance, k.rows[i]!);
  }
  let undone = 0;
  for (let i = k.rows.length - 1; i >= 0; i--) {
    const r = k.rows[i]!;
    if (!(r.t > at)) continue;
    balance = undoRow(balance, r);
    undone++;
  }
  return { balance, undone };
}

/** The non-zero balances at `at`, named, by SKU code then display path. */
function leavesAt(db: DB, keys: Iterable<Key>, at: number): StockAtLeaf[] {
  const names = nameLookup(db);
  const leaves: StockAtLeaf[] = [];
  for (const k of keys) {
    const { balance, undone } = balanceAt(k, at);
    if (sameQuantity(balance, 0)) continue;
    const n = names(k.skuId, k.locationId);
    leaves.push({
      skuId: k.skuId,
      skuCode: n.skuCode,
      skuName: n.skuName,
      locationId: k.locationId,
      locationName: n.locationName,
      displayPath: n.displayPath,
      quantity: balance,
      currentQuantity: k.current,
      rowsUndone: undone,
      approximate: k.notClean,
    });
  }
  leaves.sort((a, b) => cmp(a.skuCode ?? a.skuId, b.skuCode ?? b.skuId) || cmp(a.displayPath ?? a.locationId, b.displayPath ?? b.locationId) || cmp(a.locationId, b.locationId));
  return leaves;
}

/** The leaves summed per SKU (non-zero sums only), in the leaves' order. */
function sumPerSku(leaves: StockAtLeaf[]): StockAtSku[] {
  const bySku = new Map<string, StockAtSku>();
  for (const l of leaves) {
    const s = bySku.get(l.skuId) ?? { skuId: l.skuId, skuCode: l.skuCode, skuName: l.skuName, quantity: 0, leaves: 0 };
    s.quantity += l.quantity;
    s.leaves++;
    bySku.set(l.skuId, s);
  }
  return [...bySku.values()].filter((s) => !sameQuantity(s.quantity, 0));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function nameLookup(db: DB) {
  const sku = db.prepare("SELECT code, name FROM skus WHERE id = ?");
  const loc = db.prepare("SELECT name, display_path FROM locations WHERE id = ?");
  const fallback = db.prepare("SELECT location_name AS name FROM history WHERE sku_id = ? AND location_id = ? LIMIT 1");
  return (skuId: string, locationId: string) => {
    const s = sku.get(skuId) as { code: string | null; name: string | null } | undefined;
    const l = (loc.get(locationId) as { name: string | null; display_path: string | null } | undefined) ?? {
      name: (fallback.get(skuId, locationId) as { name: string | null } | undefined)?.name ?? null,
      display_path: null,
    };
    return { skuCode: s?.code ?? null, skuName: s?.name ?? null, locationName: l.name, displayPath: l.display_path };
  };
}
