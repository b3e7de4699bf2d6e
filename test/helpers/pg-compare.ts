/**
 * Comparing a PostgreSQL schema the publisher wrote with the SQLite mirror it read: every
 * contract table row by row (history as a multiset: each copy of an identical row counted),
 * numbers to 9 significant digits (sums of doubles in another order; within 1e-9 of 0, 0).
 */
import { expect } from "vitest";
import Database from "better-sqlite3";
import pg from "pg";
import { CONTRACT_TABLES } from "../../src/store/contract-rows.js";

export type Row = Record<string, unknown>;

/**
 * Numbers rounded to 9 significant digits (sums of doubles in another order), and within 1e-9 of 0
 * taken as 0 (a running balance of decimals that nets to nothing: 1.1e-16 summed one way, 0 or
 * -5.5e-17 another), rows as sorted JSON.
 */
export function canonical(rows: Row[], drop: string[] = []): string[] {
  return rows
    .map((r) =>
      JSON.stringify(
        Object.entries(r)
          .filter(([k]) => !drop.includes(k))
          .map(([k, v]) => [k, typeof v === "number" && !Number.isInteger(v) ? (Math.abs(v) < 1e-9 ? 0 : Number(v.toPrecision(9))) : v]),
      ),
    )
    .sort();
}

export function sqliteRows(db: string, sql: string, params: Record<string, unknown> = {}): Row[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare(sql).all(params) as Row[];
  } finally {
    d.close();
  }
}

export async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  return c;
}

/** The SQLite query with :name parameters, for PostgreSQL ($1, $2, ...) against `schema`. */
export async function pgRows(url: string, schema: string, sql: string, params: Record<string, unknown> = {}): Promise<Row[]> {
  const names: string[] = [];
  const text = sql.replace(/:(\w+)/g, (_, n: string) => {
    if (!names.includes(n)) names.push(n);
    return `$${names.indexOf(n) + 1}`;
  });
  const c = await connect(url);
  try {
    await c.query(`SET search_path TO "${schema}"`);
    return (
      await c.query(
        text,
        names.map((n) => params[n]),
      )
    ).rows as Row[];
  } finally {
    await c.end();
  }
}

function contractSelect(table: string): string {
  return table === "history" ? "SELECT *, rowid AS mirror_rowid FROM history" : `SELECT * FROM ${table}`;
}

/**
 * Every contract table equal row by row in both databases; returns the row counts compared.
 * `only.tables`/`only.drop`: a subset of the tables, without some columns (a mirror still being
 * written by a daemon, whose bookkeeping moves with every run).
 */
export async function expectTablesEqual(db: string, url: string, schema: string, only: { tables?: readonly string[]; drop?: string[] } = {}): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of only.tables ?? CONTRACT_TABLES) {
    const lite = sqliteRows(db, contractSelect(table));
    const pub = await pgRows(url, schema, `SELECT * FROM ${table}`);
    expect(pub.length, table).toBe(lite.length);
    expect(canonical(pub, only.drop), table).toEqual(canonical(lite, only.drop));
    counts[table] = lite.length;
  }
  return counts;
}

/** Every BI view answers the same in both databases (but for the seconds counted to "now", read at different moments). */
export async function expectViewsEqual(db: string, url: string, schema: string): Promise<void> {
  for (const view of ["stock_by_location", "stock_by_root", "stock_by_section", "stock_not_reflected", "history_timeline"]) {
    const drop = ["seconds_not_clean", "seconds_since_replay"];
    expect(canonical(await pgRows(url, schema, `SELECT * FROM ${view}`), drop), view).toEqual(canonical(sqliteRows(db, `SELECT * FROM ${view}`), drop));
  }
}
