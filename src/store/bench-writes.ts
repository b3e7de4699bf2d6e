/**
 * The bench's own writes, the yardsticks the store is measured against (BENCHMARKS.md,
 * scenarios 3 and 4). They are here because every SQL statement of the program lives in
 * store/ or analysis/; nothing but src/bench/ uses them.
 *
 * - rawHistoryWriter (scenario 4): SQLite's ceiling for the history table: one prepared
 *   positional INSERT per row, many rows per transaction, no hashing and no other table.
 * - openNaiveMirror (scenario 3): what a first, straightforward mirror writes: tables of
 *   its own and every row by its own INSERT OR REPLACE outside any transaction (each row is
 *   its own commit).
 *
 * Both store history as the mirror does, as a multiset: a row's identity is its content hash
 * and its copy's ordinal among the SKU's identical rows (dup_index, migrations/0004).
 */
import Database from "better-sqlite3";
import type { HistoryRow } from "../core/api-schemas.js";
import type { DB } from "./db.js";
import { historyValues } from "./sku.js";

/** One history row as the ceiling writes it: the SKU, the identity (historyCopies) and the row. */
export interface RawHistoryRow {
  skuId: string;
  rowKey: string;
  dupIndex: number;
  row: HistoryRow;
}

export interface RawHistoryWriter {
  /** Inserts the rows in one transaction. */
  insertBatch(rows: readonly RawHistoryRow[]): void;
}

/**
 * Positional inserts into the mirror's history table of `db` (a migrated mirror database),
 * first_seen_run_id 1. withIndexes false drops the history's secondary indexes first (the
 * primary key alone).
 */
export function rawHistoryWriter(db: DB, opts: { withIndexes: boolean }): RawHistoryWriter {
  if (!opts.withIndexes) {
    const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'history' AND sql IS NOT NULL").all() as Array<{ name: string }>;
    for (const { name } of indexes) db.exec(`DROP INDEX ${name}`);
  }
  const ins = db.prepare(`INSERT OR IGNORE INTO history (sku_id, row_key, dup_index, kind, occurred_at, direction, quantity, location_id,
    location_name, location_code, event_id, event_type_code, event_type_name, set_session_id, set_type_code, observed_quantity, note, first_seen_run_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`);
  const insertBatch = db.transaction((rows: readonly RawHistoryRow[]) => {
    for (const { skuId, rowKey, dupIndex, row: r } of rows) {
      ins.run(skuId, rowKey, dupIndex, ...historyValues(r));
    }
  });
  return { insertBatch };
}

/** The naive baseline's writes: each call is one INSERT OR REPLACE, committed on its own. Values in column order. */
export interface NaiveMirror {
  location(id: string, json: string): void;
  /** id, code, sku_code, name, barcode, unit, product_id, product_name, product_brand, options, total_quantity. */
  sku(values: readonly unknown[]): void;
  rootQuantity(skuId: string, rootId: string, quantity: unknown): void;
  /** sku_id, location_id, quantity, freshness_status, last_replayed_at, last_source_kind. */
  leafQuantity(values: readonly unknown[]): void;
  /** The history row's 14 fields in historyRowKey's order. */
  historyRow(skuId: string, rowKey: string, dupIndex: number, fields: readonly unknown[]): void;
  /** Rows written so far (one per call). */
  rowsWritten(): number;
  close(): void;
}

/**
 * Opens (creating) the naive baseline's database. wal: WAL with synchronous=NORMAL (the
 * mirror's durability settings); otherwise better-sqlite3's defaults (rollback journal,
 * synchronous=FULL), which is what naive code gets by not choosing.
 */
export function openNaiveMirror(path: string, opts: { wal: boolean }): NaiveMirror {
  const db = new Database(path);
  if (opts.wal) {
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL");
  }
  db.exec(`
    CREATE TABLE IF NOT EXISTS locations (id TEXT PRIMARY KEY, json TEXT);
    CREATE TABLE IF NOT EXISTS skus (id TEXT PRIMARY KEY, code TEXT, sku_code TEXT, name TEXT, barcode TEXT, unit TEXT,
      product_id TEXT, product_name TEXT, product_brand TEXT, options TEXT, total_quantity REAL);
    CREATE TABLE IF NOT EXISTS sku_root_quantities (sku_id TEXT, root_id TEXT, quantity REAL, PRIMARY KEY (sku_id, root_id));
    CREATE TABLE IF NOT EXISTS sku_location_quantities (sku_id TEXT, location_id TEXT, quantity REAL, freshness_status TEXT,
      last_replayed_at TEXT, last_source_kind TEXT, PRIMARY KEY (sku_id, location_id));
    CREATE TABLE IF NOT EXISTS history (sku_id TEXT, row_key TEXT, dup_index INTEGER, kind TEXT, occurred_at TEXT, direction TEXT,
      quantity REAL, location_id TEXT, location_name TEXT, location_code TEXT, event_id TEXT, event_type_code TEXT, event_type_name TEXT,
      set_session_id TEXT, set_type_code TEXT, observed_quantity REAL, note TEXT, PRIMARY KEY (sku_id, row_key, dup_index));
  `);
  const insLocation = db.prepare("INSERT OR REPLACE INTO locations VALUES (?, ?)");
  const insSku = db.prepare("INSERT OR REPLACE INTO skus VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const insRoot = db.prepare("INSERT OR REPLACE INTO sku_root_quantities VALUES (?, ?, ?)");
  const insLeaf = db.prepare("INSERT OR REPLACE INTO sku_location_quantities VALUES (?, ?, ?, ?, ?, ?)");
  const insRow = db.prepare(`INSERT OR REPLACE INTO history VALUES (${Array(17).fill("?").join(", ")})`);
  let rows = 0;
  const run = (stmt: Database.Statement, ...params: unknown[]): void => {
    stmt.run(...params);
    rows++;
  };
  return {
    location: (id, json) => run(insLocation, id, json),
    sku: (values) => run(insSku, ...values),
    rootQuantity: (skuId, rootId, quantity) => run(insRoot, skuId, rootId, quantity),
    leafQuantity: (values) => run(insLeaf, ...values),
    historyRow: (skuId, rowKey, dupIndex, fields) => run(insRow, skuId, rowKey, dupIndex, ...fields),
    rowsWritten: () => rows,
    close: () => db.close(),
  };
}
