/**
 * Replaying the change feed (docs/schema.md, "The change feed") onto an empty copy of the
 * schema, and the tables the feed describes, read the same way from both databases, so a test
 * can check that the feed alone rebuilds the mirror. Bookkeeping columns the feed does not
 * carry (first/last seen, misses, fetched_at) are left out of the comparison.
 */
import type Database from "better-sqlite3";

type DB = Database.Database;
type Fields = Record<string, unknown>;
export interface FeedChange {
  seq: number;
  run: number;
  at: string;
  entity: "sku" | "location" | "leaf_quantity" | "history";
  id: string;
  sku: string | null;
  change: "created" | "updated" | "deleted" | "revived" | "removed" | "appended";
  before: Fields | null;
  after: Fields | null;
}

const TABLE = { sku: "skus", location: "locations" } as const;

function setColumns(db: DB, table: string, where: string, key: unknown[], f: Fields): void {
  const cols = Object.keys(f);
  if (!cols.length) return;
  db.prepare(`UPDATE ${table} SET ${cols.map((c) => `${c} = ?`).join(", ")} WHERE ${where}`).run(...cols.map((c) => f[c]), ...key);
}

function insertRow(db: DB, table: string, f: Fields): void {
  const cols = Object.keys(f);
  db.prepare(`INSERT INTO ${table} (${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`).run(...cols.map((c) => f[c]));
}

function applySkuOrLocation(db: DB, c: FeedChange): void {
  const table = TABLE[c.entity as "sku" | "location"];
  const { root_quantities, ...fields } = (c.after ?? {}) as Fields & { root_quantities?: Record<string, number> };
  if (c.change === "created") insertRow(db, table, { id: c.id, ...fields, first_seen_at: c.at, last_seen_at: c.at });
  else setColumns(db, table, "id = ?", [c.id], fields);
  if (root_quantities) {
    db.prepare("DELETE FROM sku_root_quantities WHERE sku_id = ?").run(c.id);
    for (const [root, q] of Object.entries(root_quantities)) insertRow(db, "sku_root_quantities", { sku_id: c.id, root_location_id: root, quantity: q });
  }
}

/** Apply one change of the feed. */
export function applyChange(db: DB, c: FeedChange): void {
  if (c.entity === "sku" || c.entity === "location") return applySkuOrLocation(db, c);
  if (c.entity === "leaf_quantity") {
    if (c.change === "created") insertRow(db, "sku_location_quantities", { sku_id: c.sku, location_id: c.id, ...c.after, fetched_at: c.at });
    else if (c.change === "removed") db.prepare("DELETE FROM sku_location_quantities WHERE sku_id = ? AND location_id = ?").run(c.sku, c.id);
    else setColumns(db, "sku_location_quantities", "sku_id = ? AND location_id = ?", [c.sku, c.id], c.after ?? {});
    return;
  }
  if (c.change === "appended") for (const r of c.after!.rows as Fields[]) insertRow(db, "history", { sku_id: c.sku, ...r });
  else for (const r of c.before!.rows as Fields[]) db.prepare("DELETE FROM history WHERE sku_id = ? AND row_key = ? AND dup_index = ?").run(c.sku, r.row_key, r.dup_index);
}

/** The tables the feed describes, as sorted rows (the columns the feed carries). */
export function feedTables(db: DB): Record<string, unknown[]> {
  const q = (sql: string) => db.prepare(sql).all();
  return {
    skus: q(`SELECT id, code, sku_code, name, barcode, unit, product_id, product_name, product_brand, options, total_quantity, deleted_at FROM skus ORDER BY id`),
    sku_root_quantities: q("SELECT sku_id, root_location_id, quantity FROM sku_root_quantities ORDER BY sku_id, root_location_id"),
    locations: q(`SELECT id, name, code, parent_id, parent_name, node_kind, depth, path_ids, path_names, display_path, is_leaf, child_count,
        selectable, status, updated_at, deleted_at FROM locations ORDER BY id`),
    sku_location_quantities: q(`SELECT sku_id, location_id, quantity, freshness_status, freshness_last_replayed_at, freshness_last_source_kind,
        location_name, location_code, parent_id, not_clean_since FROM sku_location_quantities ORDER BY sku_id, location_id`),
    history: q(`SELECT sku_id, row_key, dup_index, kind, occurred_at, direction, quantity, location_id, location_name, location_code, event_id,
        event_type_code, event_type_name, set_session_id, set_type_code, observed_quantity, note, first_seen_run_id FROM history
      ORDER BY sku_id, row_key, dup_index`),
  };
}
