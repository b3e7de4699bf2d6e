/**
 * One change of the feed (docs/schema.md, "The change feed") as PostgreSQL statements on the
 * workspace's schema (the caller's transaction has it first on the search_path). Each kind has
 * one statement, and each checks that it found what the feed says was there: a row created
 * that already exists, an update or removal of a row that is not there, is a `FeedDivergence`,
 * and the publisher loads the workspace in bulk instead. Values go in as JSON through
 * json_populate_record(set), so a row's fields keep the types of the table's columns.
 */
import pg from "pg";
import type { ClientBase } from "pg";
import { PublishError } from "../core/errors.js";
import type { Change, Fields } from "../store/outbox.js";

/** PostgreSQL no longer matches what the feed says it held: the publish falls back to a bulk load. */
export class FeedDivergence extends PublishError {}

function diverged(change: Change, what: string): FeedDivergence {
  return new FeedDivergence(`change ${change.seq} (${change.entity} ${change.change} ${change.id}) does not apply: ${what}`);
}

export interface ApplyContext {
  /** The columns of each table of the workspace schema (names in the feed are checked against them). */
  columns: ReadonlyMap<string, ReadonlySet<string>>;
  /** A history row's rowid in the mirror's snapshot (its mirror_rowid). */
  historyRowid(skuId: string, rowKey: string, dupIndex: number): number | undefined;
}

const TABLE = { sku: "skus", location: "locations" } as const;

function assignments(ctx: ApplyContext, table: string, fields: Fields, change: Change): string {
  const known = ctx.columns.get(table)!;
  const names = Object.keys(fields);
  for (const n of names) if (!known.has(n)) throw diverged(change, `${table} has no column "${n}"`);
  return names.map((n) => `${pg.escapeIdentifier(n)} = r.${pg.escapeIdentifier(n)}`).join(", ");
}

async function insertRow(client: ClientBase, table: string, row: Fields, change: Change): Promise<void> {
  try {
    await client.query(`INSERT INTO ${table} SELECT * FROM json_populate_record(null::${table}, $1)`, [JSON.stringify(row)]);
  } catch (err) {
    if ((err as { code?: string }).code === "23505") throw diverged(change, `the ${table} row already exists`);
    throw err;
  }
}

async function updateRow(client: ClientBase, ctx: ApplyContext, table: string, where: string, key: unknown[], fields: Fields, change: Change): Promise<void> {
  if (Object.keys(fields).length === 0) return;
  const set = assignments(ctx, table, fields, change);
  const r = await client.query(`UPDATE ${table} t SET ${set} FROM json_populate_record(null::${table}, $1) r WHERE ${where}`, [JSON.stringify(fields), ...key]);
  if (r.rowCount !== 1) throw diverged(change, `no ${table} row to update`);
}

async function applySkuOrLocation(client: ClientBase, ctx: ApplyContext, c: Change): Promise<void> {
  const table = TABLE[c.entity as "sku" | "location"];
  const { root_quantities: roots, ...fields } = (c.after ?? {}) as Fields & { root_quantities?: Record<string, number> };
  if (c.change === "created") await insertRow(client, table, { ...fields, id: c.id, first_seen_at: c.at, last_seen_at: c.at, missed_walks: 0 }, c);
  else await updateRow(client, ctx, table, "t.id = $2", [c.id], fields, c);
  if (roots) {
    await client.query("DELETE FROM sku_root_quantities WHERE sku_id = $1", [c.id]);
    await client.query("INSERT INTO sku_root_quantities (sku_id, root_location_id, quantity) SELECT $1, key, value::double precision FROM json_each_text($2)", [c.id, JSON.stringify(roots)]);
  }
}

async function applyLeaf(client: ClientBase, ctx: ApplyContext, c: Change): Promise<void> {
  const table = "sku_location_quantities";
  if (c.change === "created") return insertRow(client, table, { ...c.after, sku_id: c.sku, location_id: c.id, fetched_at: c.at }, c);
  if (c.change === "removed") {
    const r = await client.query(`DELETE FROM ${table} WHERE sku_id = $1 AND location_id = $2`, [c.sku, c.id]);
    if (r.rowCount !== 1) throw diverged(c, `no ${table} row to remove`);
    return;
  }
  await updateRow(client, ctx, table, "t.sku_id = $2 AND t.location_id = $3", [c.sku, c.id], c.after ?? {}, c);
}

/**
 * History is a multiset: each copy of an identical row is its own row (row_key, dup_index), so
 * rows are inserted and deleted by that key and counted. A row's mirror_rowid is its rowid in
 * the snapshot; a row the snapshot no longer holds is removed again by a later change of the
 * same publish (the feed up to the snapshot's point is applied whole), so its 0 never stays.
 */
async function applyHistory(client: ClientBase, ctx: ApplyContext, c: Change): Promise<void> {
  const sku = c.sku ?? c.id;
  if (c.change === "appended") {
    const rows = (c.after?.rows ?? []) as Fields[];
    const withIds = rows.map((r) => ({ ...r, sku_id: sku, mirror_rowid: ctx.historyRowid(sku, String(r.row_key), Number(r.dup_index)) ?? 0 }));
    try {
      await client.query("INSERT INTO history SELECT * FROM json_populate_recordset(null::history, $1)", [JSON.stringify(withIds)]);
    } catch (err) {
      if ((err as { code?: string }).code === "23505") throw diverged(c, "a history row is already there");
      throw err;
    }
    return;
  }
  const rows = (c.before?.rows ?? []) as Fields[];
  const keys = rows.map((r) => ({ row_key: r.row_key, dup_index: r.dup_index }));
  const r = await client.query("DELETE FROM history h USING json_populate_recordset(null::history, $2) k WHERE h.sku_id = $1 AND h.row_key = k.row_key AND h.dup_index = k.dup_index", [
    sku,
    JSON.stringify(keys),
  ]);
  if (r.rowCount !== rows.length) throw diverged(c, `${rows.length} history rows to remove, ${r.rowCount} found`);
}

/** Applies one change; throws FeedDivergence when PostgreSQL does not hold what the change starts from. */
export async function applyChange(client: ClientBase, ctx: ApplyContext, c: Change): Promise<void> {
  if (c.entity === "sku" || c.entity === "location") return applySkuOrLocation(client, ctx, c);
  if (c.entity === "leaf_quantity") return applyLeaf(client, ctx, c);
  return applyHistory(client, ctx, c);
}
