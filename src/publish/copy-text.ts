/**
 * Rows as COPY's text format (https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.2):
 * one line per row, columns separated by a tab, NULL as \N, and backslash, tab, newline and
 * carriage return escaped. Numbers as JavaScript writes them (the shortest text that reads back
 * as the same double, so a REAL in the mirror is the same double precision in PostgreSQL).
 */
import { PublishError } from "../core/errors.js";

const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };

function field(value: unknown, table: string, column: string): string {
  if (value === null || value === undefined) return "\\N";
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (typeof value === "string") {
    // PostgreSQL text cannot hold U+0000; say where rather than let COPY fail without a column.
    if (value.includes("\u0000")) throw new PublishError(`${table}.${column} holds a NUL character, which PostgreSQL text cannot store`, { table });
    return value.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]!);
  }
  throw new PublishError(`${table}.${column}: a ${typeof value} value cannot be published`, { table });
}

/** One row as a line of COPY text, newline included. */
export function copyLine(row: readonly unknown[], table: string, columns: readonly string[]): string {
  let line = "";
  for (let i = 0; i < row.length; i++) line += (i ? "\t" : "") + field(row[i], table, columns[i]!);
  return `${line}\n`;
}
