/**
 * The contract tables (the ones docs/schema.md documents for BI: the workspace, the location
 * tree, SKUs, their quantities, history and snapshots), read as one consistent snapshot for
 * publishing elsewhere (src/publish/). Operational tables (sku_sync, sync_runs, sync_journal)
 * are not part of it.
 *
 * One read-only connection holds one read transaction from `openContractSnapshot` to `close`:
 * every table, and the point of the mirror it was taken at, come from the same moment while a
 * sync keeps writing (WAL). Rows are yielded as arrays in `columns(table)` order, one table at
 * a time (an iterator keeps the connection busy until it is exhausted).
 */
import { hasTable, openMirrorReader, type DB } from "./db.js";
import { type Change, feedBounds, feedGapAfter, readChanges } from "./outbox.js";

/** The tables a publisher copies, in an order that loads parents before children. */
export const CONTRACT_TABLES = ["workspace", "locations", "location_ancestors", "skus", "sku_root_quantities", "sku_location_quantities", "history", "inventory_snapshots"] as const;
export type ContractTable = (typeof CONTRACT_TABLES)[number];

/**
 * `history` carries its SQLite rowid as an extra last column, `mirror_rowid`: within one run
 * it is the server's order, which `history_timeline` uses to order rows with equal times.
 */
const EXTRA_COLUMNS: Partial<Record<ContractTable, { name: string; expr: string }>> = {
  history: { name: "mirror_rowid", expr: "rowid" },
};

/** Which point of the mirror a snapshot shows. */
export interface MirrorPoint {
  /** The workspace the mirror holds (null in a mirror that never completed a workspace check). */
  workspaceId: string | null;
  workspaceName: string | null;
  /** The newest sync run that has finished (any status), or null before the first one. */
  lastFinishedRunId: number | null;
  /**
   * The change feed's latest sequence number the snapshot includes (outbox.ts), read in the same
   * read transaction as the rows: a publisher that loaded this snapshot follows the feed after
   * it. 0 when the feed is empty; null for a mirror without a feed.
   */
  feedSequence: number | null;
}

/**
 * What the change feed does not carry (docs/schema.md, "The change feed"), for a publisher that
 * follows the feed: the bookkeeping columns of the tables the feed describes, by key. The feed
 * leaves them out on purpose (every walk touches `last_seen_at`; a rerun over an unchanged
 * workspace appends nothing), so a follower copies them from the snapshot at its end.
 */
export const FEED_BOOKKEEPING = {
  skus: { key: ["id"], columns: ["first_seen_at", "last_seen_at", "missed_walks"] },
  locations: { key: ["id"], columns: ["first_seen_at", "last_seen_at", "missed_walks"] },
  sku_location_quantities: { key: ["sku_id", "location_id"], columns: ["fetched_at"] },
} as const;
export type BookkeepingTable = keyof typeof FEED_BOOKKEEPING;

/** The tables the feed describes row by row (a follower checks their row counts at its end). */
export const FEED_TABLES = ["skus", "sku_root_quantities", "locations", "sku_location_quantities", "history"] as const;
export type FeedTable = (typeof FEED_TABLES)[number];

export interface ContractSnapshot {
  readonly point: MirrorPoint;
  /** The columns `rows(table)` yields, in order (the table's own, then any extra such as `mirror_rowid`). */
  columns(table: ContractTable): string[];
  rows(table: ContractTable): IterableIterator<unknown[]>;
  /** `inventory_snapshots` rows of runs from `runId` on, in `columns("inventory_snapshots")` order. */
  snapshotRowsFrom(runId: number): IterableIterator<unknown[]>;
  /** Key columns then bookkeeping columns (FEED_BOOKKEEPING) of every row of `table`. */
  bookkeepingRows(table: BookkeepingTable): IterableIterator<unknown[]>;
  /** Row counts of the tables the feed describes. */
  feedTableCounts(): Record<FeedTable, number>;
  /** The feed's changes after `since`, up to the snapshot's point, oldest first, at most `limit`. */
  changesAfter(since: number, limit: number): Change[];
  /** Has retention pruned changes after `since` (a follower resuming there must load in bulk)? */
  feedGapAfter(since: number): boolean;
  /** The rowid of a history row in the snapshot (its `mirror_rowid`), undefined when the snapshot no longer holds it. */
  historyRowid(skuId: string, rowKey: string, dupIndex: number): number | undefined;
  /** Ends the read transaction and closes the connection. */
  close(): void;
}

/** Opens the mirror read-only and starts the read transaction every table of the snapshot is read in. */
export function openContractSnapshot(dbPath: string): ContractSnapshot {
  const db = openMirrorReader(dbPath);
  try {
    db.exec("BEGIN");
    const point = readPoint(db);
    const columnsOf = new Map(CONTRACT_TABLES.map((t) => [t, tableColumns(db, t)]));
    const rowid = db.prepare("SELECT rowid AS r FROM history WHERE sku_id = ? AND row_key = ? AND dup_index = ?").pluck();
    return {
      point,
      columns: (table) => [...columnsOf.get(table)!, ...(EXTRA_COLUMNS[table] ? [EXTRA_COLUMNS[table].name] : [])],
      rows: (table) => selectAll(db, table, columnsOf.get(table)!).raw().iterate() as IterableIterator<unknown[]>,
      snapshotRowsFrom: (runId) => selectAll(db, "inventory_snapshots", columnsOf.get("inventory_snapshots")!, "WHERE run_id >= ?").raw().iterate(runId) as IterableIterator<unknown[]>,
      bookkeepingRows: (table) => {
        const { key, columns } = FEED_BOOKKEEPING[table];
        return db
          .prepare(`SELECT ${[...key, ...columns].map((c) => `"${c}"`).join(", ")} FROM "${table}"`)
          .raw()
          .iterate() as IterableIterator<unknown[]>;
      },
      feedTableCounts: () => Object.fromEntries(FEED_TABLES.map((t) => [t, (db.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number }).n])) as Record<FeedTable, number>,
      changesAfter: (since, limit) => readChanges(db, since, limit).filter((c) => point.feedSequence !== null && c.seq <= point.feedSequence),
      feedGapAfter: (since) => feedGapAfter(db, since),
      historyRowid: (skuId, rowKey, dupIndex) => rowid.get(skuId, rowKey, dupIndex) as number | undefined,
      close: () => {
        if (db.inTransaction) db.exec("COMMIT");
        db.close();
      },
    };
  } catch (err) {
    db.close();
    throw err;
  }
}

function readPoint(db: DB): MirrorPoint {
  const ws = db.prepare("SELECT id, name FROM workspace LIMIT 1").get() as { id: string; name: string } | undefined;
  const run = db.prepare("SELECT max(id) AS id FROM sync_runs WHERE finished_at IS NOT NULL").get() as { id: number | null };
  return { workspaceId: ws?.id ?? null, workspaceName: ws?.name ?? null, lastFinishedRunId: run.id, feedSequence: hasTable(db, "changes") ? feedBounds(db).latest : null };
}

function tableColumns(db: DB, table: ContractTable): string[] {
  return (db.prepare(`SELECT name FROM pragma_table_info('${table}') ORDER BY cid`).all() as Array<{ name: string }>).map((c) => c.name);
}

function selectAll(db: DB, table: ContractTable, columns: string[], where = "") {
  const extra = EXTRA_COLUMNS[table];
  const list = [...columns.map((c) => `"${c}"`), ...(extra ? [`${extra.expr} AS ${extra.name}`] : [])].join(", ");
  return db.prepare(`SELECT ${list} FROM "${table}" ${where}`);
}
