/**
 * PostgreSQL migrations: numbered, forward-only SQL files in pg-migrations/, in two sets.
 * `catalog` builds the shared schema (inventory_mirror: the workspaces table); `workspace` builds
 * one workspace's schema (the contract tables and BI views). Each schema records the migrations
 * applied to it in its own `schema_migrations` table; the pending ones are applied in one
 * transaction together with their version rows, under an advisory lock, so two publishers never
 * migrate the same schema at once and a kill leaves it at the previous version.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import pg from "pg";
import type { ClientBase } from "pg";
import { PublishError } from "../core/errors.js";
import { PACKAGE_ROOT } from "../store/db.js";

const PG_MIGRATIONS_DIR = join(PACKAGE_ROOT, "pg-migrations");

export type MigrationSet = "catalog" | "workspace";

interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

function loadPgMigrations(set: MigrationSet, dir = join(PG_MIGRATIONS_DIR, set)): PgMigration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f, i) => {
      const version = Number(f.slice(0, 4));
      if (version !== i + 1) throw new PublishError(`pg-migrations/${set}/${f}: expected version ${i + 1}; migrations are numbered 0001, 0002, ... without gaps`);
      return { version, name: f, sql: readFileSync(join(dir, f), "utf8") };
    });
}

/** The advisory lock key of one schema's migrations (and of its bulk load: see bulk-load.ts). */
export function schemaLockKey(schema: string): string {
  return `inventory_mirror:${schema}`;
}

/**
 * Brings `schema` to the latest migration of `set`, creating the schema if needed. Runs
 * `beforeApply` inside the same transaction when there is something to apply (the caller drops
 * what depends on the schema's views there). Returns the versions before and after.
 */
export async function migrateSchema(client: ClientBase, schema: string, set: MigrationSet, beforeApply: () => Promise<void> = async () => {}): Promise<{ from: number; to: number }> {
  const migrations = loadPgMigrations(set);
  const id = pg.escapeIdentifier(schema);
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [schemaLockKey(schema)]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${id}`);
    await client.query(`SET LOCAL search_path TO ${id}`);
    await client.query("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    const { rows } = await client.query<{ v: number | null }>("SELECT max(version) AS v FROM schema_migrations");
    const from = rows[0]?.v ?? 0;
    if (from > migrations.length) {
      throw new PublishError(`PostgreSQL schema ${schema} is at ${set} migration ${from}, newer than this inventory-mirror knows (${migrations.length}); upgrade inventory-mirror`);
    }
    const pending = migrations.slice(from);
    if (pending.length) await beforeApply();
    for (const m of pending) {
      await client.query(m.sql);
      await client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [m.version, m.name]);
    }
    await client.query("COMMIT");
    return { from, to: migrations.length };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    throw err;
  }
}
