/**
 * Opening the mirror for the read-only analysis commands (`stock`, `reconcile`): never
 * writes, never takes the writer lock, works while a sync runs (WAL), and refuses a file
 * whose schema this release does not match (it cannot upgrade it without writing).
 */
import { ConfigError } from "../core/errors.js";
import { loadMigrations, openMirrorReader, type DB } from "../store/db.js";

export function openReadOnly(path: string): DB {
  const db = openMirrorReader(path);
  const version = db.pragma("user_version", { simple: true }) as number;
  const latest = loadMigrations().length;
  if (version !== latest) {
    db.close();
    if (version === 0) throw new ConfigError(`${path} is not an inventory-mirror database (schema version 0); check --db`);
    if (version < latest) {
      throw new ConfigError(`${path} has schema version ${version}; this release needs ${latest}. Run 'inventory-mirror sync' once (it upgrades the file in place, data kept), then retry.`);
    }
    throw new ConfigError(`${path} has schema version ${version}, newer than this inventory-mirror knows (${latest}); upgrade inventory-mirror`);
  }
  return db;
}
