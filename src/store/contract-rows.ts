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
import { feedBounds } from "./outbox.js";

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

export interface ContractSnapshot {
  readonly point: MirrorPoint;
  /** The columns `rows(table)` yields, in order (the table's own, then any extra such as `mirror_rowid`). */
  columns(table: ContractTable): string[];
  rows(table: ContractTable): IterableIterator<unknown[]>;
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
    return {
      point,
      columns: (table) => [...columnsOf.get(table)!, ...(EXTRA_COLUMNS[table] ? [EXTRA_COLUMNS[table].name] : [])],
      rows: (table) => selectAll(db, table, columnsOf.get(table)!).raw().iterate() as IterableIterator<unknown[]>,
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

function selectAll(db: DB, table: ContractTable, columns: string[]) {
  const extra = EXTRA_COLUMNS[table];
  const list = [...columns.map((c) => `"${c}"`), ...(extra ? [`${extra.expr} AS ${extra.name}`] : [])].join(", ");
  return db.prepare(`SELECT ${list} FROM "${table}"`);
}
