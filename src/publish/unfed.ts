/**
 * What the change feed does not carry, brought up to the snapshot's point at the end of a
 * publish that followed the feed, in the same transaction as its last batch:
 * - the workspace row and `location_ancestors` (small, derived from the locations): replaced;
 * - `inventory_snapshots`: the rows of runs from the newest one PostgreSQL has on, replaced;
 * - the bookkeeping columns of skus, locations and leaf rows (first/last seen, misses,
 *   fetched_at: store/contract-rows.ts, FEED_BOOKKEEPING): copied into a temporary table and
 *   updated where they differ.
 * Then the row counts of the tables the feed describes are compared with the snapshot's: a
 * difference is a FeedDivergence (the publisher loads in bulk instead).
 */
import pg from "pg";
import type { ClientBase } from "pg";
import { type BookkeepingTable, type ContractSnapshot, FEED_BOOKKEEPING, FEED_TABLES } from "../store/contract-rows.js";
import { FeedDivergence } from "./apply-change.js";
import { copyRows } from "./bulk-load.js";

const BOOKKEEPING_TABLES = Object.keys(FEED_BOOKKEEPING) as BookkeepingTable[];

/** Rows whose bookkeeping columns changed; returns how many. */
async function refreshBookkeeping(client: ClientBase, snapshot: ContractSnapshot, table: BookkeepingTable): Promise<number> {
  const { key, columns } = FEED_BOOKKEEPING[table];
  const all = [...key, ...columns].map((c) => pg.escapeIdentifier(c));
  const tmp = pg.escapeIdentifier(`im_bookkeeping_${table}`);
  await client.query(`CREATE TEMPORARY TABLE ${tmp} ON COMMIT DROP AS SELECT ${all.join(", ")} FROM ${table} WITH NO DATA`);
  await copyRows(client, tmp, table, [...key, ...columns], snapshot.bookkeepingRows(table));
  const cols = columns.map((c) => pg.escapeIdentifier(c));
  const r = await client.query(
    `UPDATE ${table} t SET ${cols.map((c) => `${c} = b.${c}`).join(", ")} FROM ${tmp} b
     WHERE ${key.map((k) => `t.${pg.escapeIdentifier(k)} = b.${pg.escapeIdentifier(k)}`).join(" AND ")}
       AND (${cols.map((c) => `t.${c}`).join(", ")}, NULL) IS DISTINCT FROM (${cols.map((c) => `b.${c}`).join(", ")}, NULL)`,
  );
  await client.query(`DROP TABLE ${tmp}`);
  return r.rowCount ?? 0;
}

async function replaceTable(client: ClientBase, snapshot: ContractSnapshot, table: "workspace" | "location_ancestors"): Promise<void> {
  await client.query(`DELETE FROM ${table}`);
  await copyRows(client, table, table, snapshot.columns(table), snapshot.rows(table));
}

async function refreshSnapshots(client: ClientBase, snapshot: ContractSnapshot): Promise<void> {
  const { rows } = await client.query<{ run: string | number | null }>("SELECT max(run_id) AS run FROM inventory_snapshots");
  const from = Number(rows[0]?.run ?? 0);
  await client.query("DELETE FROM inventory_snapshots WHERE run_id >= $1", [from]);
  await copyRows(client, "inventory_snapshots", "inventory_snapshots", snapshot.columns("inventory_snapshots"), snapshot.snapshotRowsFrom(from));
}

async function checkCounts(client: ClientBase, snapshot: ContractSnapshot): Promise<void> {
  const want = snapshot.feedTableCounts();
  const { rows } = await client.query<Record<string, string>>(`SELECT ${FEED_TABLES.map((t) => `(SELECT count(*) FROM ${t}) AS ${t}`).join(", ")}`);
  for (const t of FEED_TABLES) {
    if (Number(rows[0]![t]) !== want[t]) throw new FeedDivergence(`${t} holds ${rows[0]![t]} rows in PostgreSQL after following the feed, ${want[t]} in the mirror`, { table: t });
  }
}

/** Brings what the feed does not carry to the snapshot's point; returns the bookkeeping rows updated. */
export async function catchUpUnfed(client: ClientBase, snapshot: ContractSnapshot): Promise<number> {
  await replaceTable(client, snapshot, "workspace");
  await replaceTable(client, snapshot, "location_ancestors");
  await refreshSnapshots(client, snapshot);
  let updated = 0;
  for (const t of BOOKKEEPING_TABLES) updated += await refreshBookkeeping(client, snapshot, t);
  await checkCounts(client, snapshot);
  return updated;
}
