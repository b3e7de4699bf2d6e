/**
 * Decimal quantities (server variance `quantities: "decimal"`, docs/server-variance.md): a
 * leaf's history sums to its quantity only up to binary float noise (0.1 + 0.2 − 0.3 is
 * 5.6e-17). Nothing that reads the mirror may take that noise for stock or for a mismatch:
 * the documented "stock as of" query, `stock --at` and `reconcile`.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase, type DB } from "../../src/store/db.js";
import { documentedQuery } from "../../src/analysis/queries.js";
import { reconcile } from "../../src/analysis/reconcile.js";
import { stockAt } from "../../src/analysis/stock-at.js";

const SKU = "AAAAAAAA-0000-4000-8000-000000000001";
const EMPTIED = "BBBBBBBB-0000-4000-8000-000000000001";
const STOCKED = "BBBBBBBB-0000-4000-8000-000000000002";
const ROOT = "CCCCCCCC-0000-4000-8000-000000000001";
const NOW = "2026-06-01T00:00:00.000Z";

let dir: string;
let db: DB;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "im-decimal-"));
  db = openDatabase(join(dir, "d.db"));
  const loc = db.prepare("INSERT INTO locations (id, name, depth, path_ids, is_leaf, status, first_seen_at, last_seen_at) VALUES (?, ?, ?, ?, ?, 'active', ?, ?)");
  loc.run(ROOT, "Mill", 0, JSON.stringify([ROOT]), 0, NOW, NOW);
  for (const [id, name] of [
    [EMPTIED, "Bin 1"],
    [STOCKED, "Bin 2"],
  ])
    loc.run(id, name, 1, JSON.stringify([ROOT, id]), 1, NOW, NOW);
  db.prepare("INSERT INTO skus (id, code, name, total_quantity, first_seen_at, last_seen_at) VALUES (?, 'SKU-1', 'Flour', 0.9, ?, ?)").run(SKU, NOW, NOW);
  db.prepare("INSERT INTO sku_root_quantities (sku_id, root_location_id, quantity) VALUES (?, ?, 0.9)").run(SKU, ROOT);
  const leaf = db.prepare(`INSERT INTO sku_location_quantities (sku_id, location_id, quantity, freshness_status, fetched_at) VALUES (?, ?, ?, 'clean', ?)`);
  leaf.run(SKU, EMPTIED, 0, NOW);
  leaf.run(SKU, STOCKED, 0.9, NOW);
  const row = db.prepare(`INSERT INTO history (sku_id, row_key, dup_index, kind, occurred_at, direction, quantity, location_id, observed_quantity, first_seen_run_id)
    VALUES (?, ?, 0, ?, ?, ?, ?, ?, ?, 1)`);
  // 0.1 + 0.2 − 0.3 = 5.551115123125783e-17 in binary floating point: the leaf is empty.
  row.run(SKU, "e1", "movement", "2026-01-01T00:00:00.000Z", "in", 0.1, EMPTIED, null);
  row.run(SKU, "e2", "movement", "2026-01-02T00:00:00.000Z", "in", 0.2, EMPTIED, null);
  row.run(SKU, "e3", "movement", "2026-01-03T00:00:00.000Z", "out", 0.3, EMPTIED, null);
  // A SET to 0.6, then 0.1 and 0.2 in: 0.8999999999999999 replayed row by row, where the detail says 0.9.
  row.run(SKU, "s1", "set", "2026-01-01T00:00:00.000Z", "in", 0.6, STOCKED, 0.6);
  row.run(SKU, "s2", "movement", "2026-01-02T00:00:00.000Z", "in", 0.1, STOCKED, null);
  row.run(SKU, "s3", "movement", "2026-01-03T00:00:00.000Z", "in", 0.2, STOCKED, null);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("decimal quantities: float noise is not stock and not a mismatch", () => {
  it("the history does carry the noise (the premise)", () => {
    const last = (leaf: string) =>
      (db.prepare("SELECT running_balance FROM history_timeline WHERE sku_id = ? AND location_id = ? AND is_latest").get(SKU, leaf) as { running_balance: number }).running_balance;
    expect(last(EMPTIED)).not.toBe(0);
    expect(Math.abs(last(EMPTIED))).toBeLessThan(1e-15);
    // Replayed row by row (as reconcile does): 0.6, 0.7, 0.8999999999999999.
    expect(0.6 + 0.1 + 0.2).not.toBe(0.9);
    expect(last(STOCKED)).toBeCloseTo(0.9, 12);
  });

  it("the documented stock-as-of query lists the stocked leaf only, not the emptied one's residue", () => {
    const got = db.prepare(documentedQuery("sku-stock-as-of").sql).all({ sku_id: SKU, at: "2026-02-01T00:00:00.000Z" }) as Array<{ location_id: string; quantity: number }>;
    expect(got.map((r) => r.location_id)).toEqual([STOCKED]);
    expect(got[0]!.quantity).toBeCloseTo(0.9, 12);
  });

  it("stock --at sees the emptied leaf as empty, and reconcile finds nothing to report", () => {
    const at = stockAt(db, { at: Date.parse("2026-02-01T00:00:00.000Z") });
    expect(at.leaves.map((l) => l.locationId)).toEqual([STOCKED]);
    const report = reconcile(db);
    expect(report).toMatchObject({ ok: true, unexplained: 0, explained: 0 });
    expect(report.mismatches).toEqual([]);
  });
});
