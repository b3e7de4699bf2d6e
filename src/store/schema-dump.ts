/**
 * schema.sql is the migrations' result, dumped: `npm run schema` rewrites it and a
 * test checks that a database the program creates dumps to exactly that text.
 */
import Database from "better-sqlite3";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { migrate, PACKAGE_ROOT, type DB } from "./db.js";

export const SCHEMA_HEADER = `-- inventory-mirror: the complete current schema (generated from migrations/ by 'npm run schema'; do not edit by hand).
-- A database at this schema has PRAGMA user_version = `;

/** Tables, indexes, views and triggers in a stable order, without SQLite's internal and FTS shadow tables. */
export function dumpSchema(db: DB): string {
  const version = db.pragma("user_version", { simple: true }) as number;
  const rows = db
    .prepare(
      `SELECT type, name, sql FROM sqlite_master
       WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
       ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, name`,
    )
    .all() as Array<{ type: string; name: string; sql: string }>;
  const virtual = rows.filter((r) => /^CREATE VIRTUAL TABLE/i.test(r.sql)).map((r) => r.name);
  const isShadow = (name: string) => virtual.some((v) => name.startsWith(`${v}_`));
  const body = rows
    .filter((r) => !isShadow(r.name))
    .map((r) => `${r.sql};`)
    .join("\n\n");
  return `${SCHEMA_HEADER}${version}.\n\n${body}\n\nPRAGMA user_version = ${version};\n`;
}

export function schemaFromMigrations(): string {
  const db = new Database(":memory:");
  try {
    migrate(db);
    return dumpSchema(db);
  } finally {
    db.close();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/^.*\/dist\//, "/dist/"))) {
  writeFileSync(join(PACKAGE_ROOT, "schema.sql"), schemaFromMigrations());
  process.stdout.write("wrote schema.sql\n");
}
