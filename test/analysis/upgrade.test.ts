/**
 * A database written by the first release (schema version 1, the dump fixtures/v1.sql) opens with
 * the current program, is upgraded by the forward migrations with its data intact, ends
 * at exactly the schema a new database gets (schema.sql), and the new objects (location
 * tree, full-text search) are filled from the old rows.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { loadMigrations, migrate, openDatabase } from "../../src/store/db.js";
import { dumpSchema } from "../../src/store/schema-dump.js";
import { reconcile } from "../../src/analysis/reconcile.js";
import { stockAt } from "../../src/analysis/stock-at.js";
import { runCli } from "../helpers/cli.js";

/** The first release's database, as `sqlite3 .dump` text (fixtures/make-v1-fixture.mjs). */
const FIXTURE_SQL = readFileSync(new URL("./fixtures/v1.sql", import.meta.url), "utf8");
/** Load the dump into a new file, as the first release left it on disk. */
function writeFixture(file: string): void {
  const db = new Database(file);
  try {
    db.exec(FIXTURE_SQL);
  } finally {
    db.close();
  }
}
let FIXTURE: string;
const SCHEMA = readFileSync(new URL("../../schema.sql", import.meta.url), "utf8");
const V1_TABLES = ["workspace", "locations", "skus", "sku_root_quantities", "sku_location_quantities", "history", "sku_sync", "sync_runs", "sync_journal"];
const A = "5a1e0000-0000-4000-8000-00000000000a";
const B = "5a1e0000-0000-4000-8000-00000000000b";
const ROOT = "0f2b1c3d-0000-4000-8000-000000000001";
const SECTION = "0f2b1c3d-0000-4000-8000-000000000002";
const L1 = "0f2b1c3d-0000-4000-8000-000000000003";

let dir: string;
let path: string;
let before: Record<string, unknown[]>;

/** Every row of the version-1 tables, by the version-1 columns only, in a stable order. */
function v1Rows(db: Database.Database, columnsOf: (t: string) => string[]): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const t of V1_TABLES) {
    const cols = columnsOf(t)
      .map((c) => `"${c}"`)
      .join(", ");
    out[t] = db.prepare(`SELECT ${cols} FROM ${t} ORDER BY ${cols}`).all();
  }
  return out;
}
const columns = (db: Database.Database) => (t: string) => (db.prepare(`PRAGMA table_info(${t})`).all() as Array<{ name: string }>).map((c) => c.name);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-upgrade-"));
  FIXTURE = join(dir, "v1.db");
  writeFixture(FIXTURE);
  path = join(dir, "old.db");
  writeFixture(path);
  const old = new Database(path, { readonly: true });
  before = v1Rows(old, columns(old));
  old.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("upgrading a database written by the first release", () => {
  it("the fixture really is schema version 1: what migration 0001 alone creates", () => {
    const fixture = new Database(FIXTURE, { readonly: true });
    const fresh = new Database(":memory:");
    migrate(fresh, loadMigrations().slice(0, 1));
    try {
      expect(fixture.pragma("user_version", { simple: true })).toBe(1);
      expect(dumpSchema(fixture)).toBe(dumpSchema(fresh));
      expect(before.skus).toHaveLength(3);
      expect(before.history).toHaveLength(7);
    } finally {
      fixture.close();
      fresh.close();
    }
  });

  it("the read-only commands refuse it with a clear message instead of failing on missing views", async () => {
    const r = await runCli(["reconcile"], { env: { INVENTORY_DB: path } });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/schema version 1; this release needs \d+\. Run 'inventory-mirror sync' once/);
  });

  it("opens, migrates forward to the current schema, and keeps every row", () => {
    const db = openDatabase(path);
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(loadMigrations().length);
      // Same schema, object for object, as a database created by this release.
      expect(dumpSchema(db)).toBe(SCHEMA);
      const old = new Database(FIXTURE, { readonly: true });
      const after = v1Rows(db, columns(old));
      old.close();
      expect(after).toEqual(before);
    } finally {
      db.close();
    }
  });

  it("fills the new objects from the old rows: location tree, full-text search, views", () => {
    const db = new Database(path, { readonly: true });
    try {
      expect(db.prepare("SELECT ancestor_id, ancestor_depth FROM location_ancestors WHERE location_id = ? ORDER BY ancestor_depth").all(L1)).toEqual([
        { ancestor_id: ROOT, ancestor_depth: 0 },
        { ancestor_id: SECTION, ancestor_depth: 1 },
        { ancestor_id: L1, ancestor_depth: 2 },
      ]);
      const search = (text: string) =>
        (db.prepare(`SELECT s.id FROM sku_search f JOIN skus s ON s.rowid = f.rowid WHERE sku_search MATCH ? ORDER BY s.id`).all(`"${text}"`) as Array<{ id: string }>).map((r) => r.id);
      expect(search("mug")).toEqual([A]);
      expect(search("acme")).toHaveLength(2); // A and the deleted SKU (the documented query filters deleted_at)
      expect(search("8000000000024")).toEqual([B]);
      expect(search("ori-0002")).toEqual([B]);
      expect(db.prepare("SELECT sku_id, root_id, quantity FROM stock_by_root ORDER BY sku_id").all()).toEqual([
        { sku_id: A, root_id: ROOT, quantity: 15 },
        { sku_id: B, root_id: ROOT, quantity: 7 },
      ]);
      expect(db.prepare("SELECT sku_id, section_id, quantity FROM stock_by_section ORDER BY sku_id").all()).toEqual([
        { sku_id: A, section_id: SECTION, quantity: 15 },
        { sku_id: B, section_id: SECTION, quantity: 7 },
      ]);
      expect(
        db.prepare("SELECT seq, kind, delta, observed_quantity, balance_before, running_balance, is_latest FROM history_timeline WHERE sku_id = ? AND location_id = ? ORDER BY seq").all(A, L1),
      ).toEqual([
        { seq: 1, kind: "movement", delta: 10, observed_quantity: null, balance_before: 0, running_balance: 10, is_latest: 0 },
        { seq: 2, kind: "movement", delta: -3, observed_quantity: null, balance_before: 10, running_balance: 7, is_latest: 0 },
        { seq: 3, kind: "set", delta: -1, observed_quantity: 6, balance_before: 7, running_balance: 6, is_latest: 0 },
        { seq: 4, kind: "movement", delta: 4, observed_quantity: null, balance_before: 6, running_balance: 10, is_latest: 1 },
      ]);
      const report = reconcile(db);
      expect(report.mismatches).toEqual([]);
      expect(report.ok).toBe(true);
      expect(stockAt(db, { at: Date.parse("2025-01-02T12:00:00.000Z") }).leaves.map((l) => [l.skuId, l.locationId, l.quantity])).toEqual([
        [A, L1, 7],
        [A, "0f2b1c3d-0000-4000-8000-000000000004", 5],
        [B, "0f2b1c3d-0000-4000-8000-000000000004", 7],
      ]);
    } finally {
      db.close();
    }
  });

  it("keeps the search index in step with later writes to skus", () => {
    const db = openDatabase(path);
    try {
      db.prepare("UPDATE skus SET name = 'Porcelain Cup Blue' WHERE id = ?").run(A);
      db.prepare(`INSERT INTO skus (id, code, name, first_seen_at, last_seen_at) VALUES ('5a1e0000-0000-4000-8000-00000000000d', 'SKU-9', 'Enamel Mug', 'x', 'x')`).run();
      db.prepare("DELETE FROM skus WHERE id = ?").run(B);
      const search = (text: string) =>
        (db.prepare(`SELECT s.name FROM sku_search f JOIN skus s ON s.rowid = f.rowid WHERE sku_search MATCH ? ORDER BY s.name`).all(`"${text}"`) as Array<{ name: string }>).map((r) => r.name);
      expect(search("mug")).toEqual(["Enamel Mug", "Porcelain Cup Blue"]); // the second by its product name
      expect(search("mug blue")).toEqual([]); // the old name is gone from the index
      expect(search("porcelain")).toEqual(["Porcelain Cup Blue"]);
      expect(search("green tea")).toEqual([]);
      // The external-content index agrees with its content table.
      db.prepare("INSERT INTO sku_search(sku_search, rank) VALUES ('integrity-check', 1)").run();
    } finally {
      db.close();
    }
  });
});
