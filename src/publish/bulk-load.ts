/**
 * The bulk load: every contract table of a mirror snapshot copied into a workspace schema with
 * COPY (pg-copy-streams), inside the caller's transaction. Each table is emptied just before its
 * COPY, so until the transaction commits readers keep seeing the previous load whole, and a
 * publisher killed at any point leaves it as it was (PostgreSQL rolls the transaction back).
 */
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import pg from "pg";
import type { ClientBase } from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { CONTRACT_TABLES, type ContractSnapshot, type ContractTable } from "../store/contract-rows.js";
import { copyLine } from "./copy-text.js";
import { asPublishError } from "./pg-error.js";

/** COPY data is sent in chunks of about this many characters (fewer, larger writes to the socket). */
const COPY_CHUNK_CHARS = 256 * 1024;

export interface TableLoad {
  table: ContractTable;
  rows: number;
  ms: number;
}

function* copyChunks(rows: Iterable<unknown[]>, table: string, columns: string[]): Generator<string> {
  let chunk = "";
  for (const row of rows) {
    chunk += copyLine(row, table, columns);
    if (chunk.length >= COPY_CHUNK_CHARS) {
      yield chunk;
      chunk = "";
    }
  }
  if (chunk) yield chunk;
}

async function loadTable(client: ClientBase, schema: string, snapshot: ContractSnapshot, table: ContractTable): Promise<TableLoad> {
  const started = Date.now();
  try {
    return await copyTable(client, schema, snapshot, table, started);
  } catch (err) {
    throw asPublishError(err, table);
  }
}

async function copyTable(client: ClientBase, schema: string, snapshot: ContractSnapshot, table: ContractTable, started: number): Promise<TableLoad> {
  const target = `${pg.escapeIdentifier(schema)}.${pg.escapeIdentifier(table)}`;
  await client.query(`TRUNCATE ${target}`);
  const rows = await copyRows(client, target, table, snapshot.columns(table), snapshot.rows(table));
  return { table, rows, ms: Date.now() - started };
}

/**
 * COPYs `rows` (arrays in `columns` order) into `target` (an identifier, escaped and qualified as
 * the caller needs) inside the caller's transaction; `table` names it in errors. Returns the count.
 */
export async function copyRows(client: ClientBase, target: string, table: string, columns: string[], rows: Iterable<unknown[]>): Promise<number> {
  const copy = client.query(copyFrom(`COPY ${target} (${columns.map((c) => pg.escapeIdentifier(c)).join(", ")}) FROM STDIN`));
  await pipeline(Readable.from(copyChunks(rows, table, columns)), copy);
  return Number(copy.rowCount);
}

/** Loads every contract table, parents first; `onTable` hears each one as it is done. */
export async function bulkLoad(client: ClientBase, schema: string, snapshot: ContractSnapshot, onTable: (t: TableLoad) => void = () => {}): Promise<TableLoad[]> {
  const loads: TableLoad[] = [];
  for (const table of CONTRACT_TABLES) {
    const load = await loadTable(client, schema, snapshot, table);
    onTable(load);
    loads.push(load);
  }
  return loads;
}
