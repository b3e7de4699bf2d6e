/**
 * The two store hooks the sync calls, in-process: saveSnapshot (one transaction per run,
 * replaced when called again) and the WAL guard's decisions (truncate when no reader holds
 * the WAL, give up without blocking when one does, back under the cap once it lets go).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, statSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { openDatabase, type DB } from "../../src/store/db.js";
import { saveSnapshot } from "../../src/store/list.js";
import { startWalGuard } from "../../src/store/wal-guard.js";

let dir: string;
let path: string;
let db: DB;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "im-store-add-"));
  path = join(dir, "a.db");
  db = openDatabase(path);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const roots = [
  { id: "r1", name: "Warehouse A", code: "WH-A", childCount: 2, leafLocationIds: ["l1", "l2"], skuCount: 3, totalQuantity: 40, averageQuantityPerSku: 40 / 3 },
  { id: "r2", name: "Warehouse B", code: "WH-B", childCount: 1, leafLocationIds: null, skuCount: 0, totalQuantity: 0, averageQuantityPerSku: 0 },
];

describe("saveSnapshot", () => {
  it("stores one row per root and one overall row (root_id NULL), replacing the run's earlier snapshot", () => {
    saveSnapshot(db, 7, roots, { skuCount: 3, totalQuantity: 40, averageQuantityPerSku: 40 / 3 }, "2026-01-01T00:00:00.000Z");
    saveSnapshot(db, 7, roots.slice(0, 1), { skuCount: 3, totalQuantity: 41, averageQuantityPerSku: 41 / 3 }, "2026-01-01T00:00:01.000Z");
    saveSnapshot(db, 8, roots, null, "2026-01-02T00:00:00.000Z");
    expect(db.prepare("SELECT run_id, taken_at, root_id, name, leaf_location_ids, sku_count, total_quantity FROM inventory_snapshots ORDER BY run_id, root_id IS NULL, root_id").all()).toEqual([
      { run_id: 7, taken_at: "2026-01-01T00:00:01.000Z", root_id: "r1", name: "Warehouse A", leaf_location_ids: '["l1","l2"]', sku_count: 3, total_quantity: 40 },
      { run_id: 7, taken_at: "2026-01-01T00:00:01.000Z", root_id: null, name: null, leaf_location_ids: null, sku_count: 3, total_quantity: 41 },
      { run_id: 8, taken_at: "2026-01-02T00:00:00.000Z", root_id: "r1", name: "Warehouse A", leaf_location_ids: '["l1","l2"]', sku_count: 3, total_quantity: 40 },
      { run_id: 8, taken_at: "2026-01-02T00:00:00.000Z", root_id: "r2", name: "Warehouse B", leaf_location_ids: null, sku_count: 0, total_quantity: 0 },
    ]);
  });

  it("works inside the caller's transaction (a savepoint) and rolls back with it", () => {
    expect(() =>
      db.transaction(() => {
        saveSnapshot(db, 9, roots, null);
        throw new Error("page failed");
      })(),
    ).toThrow("page failed");
    expect(db.prepare("SELECT count(*) AS n FROM inventory_snapshots").get()).toEqual({ n: 0 });
  });
});

describe("startWalGuard", () => {
  const wal = () => (existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0);
  const write = (n: number) => {
    const ins = db.prepare("INSERT INTO sync_journal (run_id, at, kind, message) VALUES (1, 'x', 'info', ?)");
    for (let i = 0; i < n; i++) db.transaction(() => ins.run("x".repeat(3000)))();
  };

  it("empties the WAL when no reader holds it; with a reader it gives up without blocking, then truncates once the reader is gone", () => {
    db.pragma("wal_autocheckpoint = 0"); // only the guard checkpoints here
    const guard = startWalGuard(db, { capBytes: 64 * 1024, intervalMs: 60_000, maxWaitMs: 50, maxBackoffMs: 60_000 });
    try {
      write(100);
      expect(wal()).toBeGreaterThan(64 * 1024);
      const first = guard.check();
      expect(first).toMatchObject({ action: "truncate", busy: false, sizeAfter: 0 });

      const reader = new Database(path, { readonly: true });
      reader.exec("BEGIN");
      reader.prepare("SELECT count(*) FROM sync_journal").get();
      write(100);
      const t0 = Date.now();
      const pinned = guard.check();
      expect(Date.now() - t0).toBeLessThan(1_000);
      expect(pinned).toMatchObject({ action: "truncate-wait", busy: true });
      expect(pinned.sizeAfter).toBeGreaterThan(64 * 1024);
      // Backing off: the next attempt does not wait again.
      expect(guard.check()).toMatchObject({ action: "truncate", busy: true });
      // The writer is not blocked by the reader.
      write(10);
      reader.exec("COMMIT");
      reader.close();
      expect(guard.check()).toMatchObject({ action: "truncate", busy: false, sizeAfter: 0 });
      expect(guard.stats).toMatchObject({ truncations: 2, waitingAttempts: 1, lastError: null });
    } finally {
      guard.stop();
    }
  });

  it("below a quarter of the cap it only runs passive checkpoints; it refuses a nonsense cap", () => {
    const guard = startWalGuard(path, { capBytes: 64 * 1024 * 1024, intervalMs: 60_000 });
    try {
      write(5);
      expect(guard.check()).toMatchObject({ action: "passive", busy: false });
    } finally {
      guard.stop();
    }
    expect(() => startWalGuard(path, { capBytes: 0 })).toThrow(/capBytes/);
  });
});
