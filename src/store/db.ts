/**
 * Opening the mirror database: file permissions, the single-writer lock, pragmas
 * and forward-only migrations.
 *
 * One writer: a second SQLite file "<db>.lock" is held with an EXCLUSIVE lock for
 * the writer's lifetime. The OS releases it when the process dies, kill -9
 * included, so there is never a stale lock to clean up; a second writer gets
 * SQLITE_BUSY at once and exits with a clear message. Readers (BI tools, `status`)
 * never touch the lock and are never blocked: the database is in WAL mode.
 */
import Database from "better-sqlite3";
import { accessSync, chmodSync, closeSync, constants, existsSync, openSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULTS } from "../core/defaults.js";
import { ConfigError, StoreError } from "../core/errors.js";

export type DB = Database.Database;

/** Where migrations/ and schema.sql live: the package root (two levels above dist/store/). */
export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const MIGRATIONS_DIR = join(PACKAGE_ROOT, "migrations");

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 4)), name: f, sql: readFileSync(join(dir, f), "utf8") }))
    .map((m, i) => {
      if (m.version !== i + 1) throw new StoreError(`migration ${m.name}: expected version ${i + 1}; migrations must be numbered 0001, 0002, ... without gaps`);
      return m;
    });
}

/** Bring `db` to the latest schema. Each migration and its user_version bump commit together. */
export function migrate(db: DB, migrations = loadMigrations()): { from: number; to: number } {
  const from = db.pragma("user_version", { simple: true }) as number;
  const latest = migrations.length;
  if (from > latest) {
    throw new StoreError(`the database schema is version ${from}, newer than this inventory-mirror knows (${latest}); upgrade inventory-mirror or use another --db`);
  }
  for (const m of migrations.slice(from)) {
    db.transaction(() => {
      db.exec(m.sql);
      db.pragma(`user_version = ${m.version}`);
    })();
  }
  return { from, to: latest };
}

export interface OpenOptions {
  busyTimeoutMs?: number;
}

/** Open (creating if needed) the database for writing and bring it up to date. Call `acquireWriterLock` first. */
export function openDatabase(path: string, opts: OpenOptions = {}): DB {
  checkDirectory(path);
  createOwnerOnly(path);
  tightenMode(path);
  let db: DB;
  try {
    db = new Database(path);
  } catch (err) {
    throw new StoreError(`cannot open database ${path}: ${(err as Error).message}`, { cause: err });
  }
  db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? DEFAULTS.busyTimeoutMs}`);
  db.pragma("journal_mode = WAL");
  // NORMAL is durable across process crashes in WAL mode (only an OS crash can lose the last commits).
  db.pragma("synchronous = NORMAL");
  db.pragma("foreign_keys = ON");
  migrate(db);
  return db;
}

/**
 * The one way a read-only connection is opened (status, the daemon's reads, the analysis
 * commands, the checks below): the file must exist, nothing is ever written, and a reader
 * waits at most `busyTimeoutMs` for the moments the writer holds a lock it needs (WAL).
 */
export function openReadOnly(path: string, busyTimeoutMs: number = DEFAULTS.busyTimeoutMs): DB {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  return db;
}

/**
 * A short-lived read-write connection to an existing mirror for one small write from a process
 * that is not its writer (the publisher confirming what it published, store/outbox.ts): no
 * migration, no writer lock, and SQLite's own lock waited for at most `busyTimeoutMs`.
 */
export function openSideWriter(path: string, busyTimeoutMs: number): DB {
  const db = new Database(path, { fileMustExist: true });
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  return db;
}

/** A read-only connection to an existing mirror: refuses a missing file or another program's database. */
export function openMirrorReader(path: string): DB {
  if (!existsSync(path)) throw new ConfigError(`database ${path} does not exist; run 'inventory-mirror sync --full' first or pass --db`);
  assertMirrorDatabase(path);
  return openReadOnly(path);
}

/** Does the database have this table (or view)? An old or empty file may lack some. */
export function hasTable(db: DB, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?").get(name) !== undefined;
}

/**
 * Is a writer holding the database's lock right now? The writer keeps "<db>.lock" in an
 * EXCLUSIVE lock for its whole life, so a read of it fails at once while one runs. Works
 * across pid namespaces (a status run from the host against a container's file), where a
 * pid says nothing. No lock file: no writer has ever run.
 */
export function writerLockHeld(dbPath: string): boolean {
  const lockPath = `${dbPath}.lock`;
  if (!existsSync(lockPath)) return false;
  let lock: DB | undefined;
  try {
    lock = openReadOnly(lockPath, 0);
    lock.prepare("SELECT count(*) FROM sqlite_master").get();
    return false;
  } catch {
    return true;
  } finally {
    lock?.close();
  }
}

/** Tables every inventory-mirror database has had since its first schema (0001). */
const OUR_TABLES = ["workspace", "locations", "skus", "sync_runs", "sync_journal"];

/**
 * Refuse a file that is not ours, before anything writes to it (no WAL switch, no lock file,
 * no migration): a non-empty SQLite database without our tables, one whose tables are only
 * partly ours, or a file that is not SQLite at all. A missing or empty file, or an empty
 * database, is fine: it becomes a mirror. Read through a read-only handle, which leaves no
 * -wal/-shm behind on a file in rollback-journal mode (every file that is not ours).
 */
export function assertMirrorDatabase(path: string): void {
  if (!existsSync(path)) return;
  if (statSync(path).isDirectory()) throw new ConfigError(`db: ${path} is a directory; --db names the database file, e.g. ${join(path, "inventory.db")}`);
  if (statSync(path).size === 0) return;
  let db: DB | undefined;
  let tables: string[];
  let version: number;
  try {
    db = openReadOnly(path);
    tables = (db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
    version = db.pragma("user_version", { simple: true }) as number;
  } catch (err) {
    throw new ConfigError(`${path} is not an SQLite database (${(err as Error).message}); it is left untouched. Choose another --db for the mirror.`, { cause: err });
  } finally {
    db?.close();
  }
  if (tables.length === 0 && version === 0) return;
  const missing = OUR_TABLES.filter((t) => !tables.includes(t));
  if (missing.length > 0 || version === 0) {
    const shown = tables.slice(0, 5).join(", ") + (tables.length > 5 ? `, … (${tables.length} in all)` : "");
    throw new ConfigError(
      `${path} is not an inventory-mirror database (it holds ${tables.length ? `tables ${shown}` : `no tables but user_version ${version}`}); it is left untouched. Choose another --db for the mirror.`,
    );
  }
}

/**
 * A writing run needs to create files beside the database (the lock, -wal, -shm) and to write
 * the database itself: both are checked before anything is created, so a read-only place is a
 * clear refusal (exit 2) with nothing left behind, not an EACCES halfway through.
 */
export function checkWritable(path: string): void {
  const dir = dirname(path);
  const who = typeof process.getuid === "function" ? ` (uid ${process.getuid()})` : "";
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch {
    throw new ConfigError(
      `database directory ${dir} is not writable by this user${who}: the mirror needs to create ${basename(path)}.lock, -wal and -shm there. Make it writable or choose another --db`,
    );
  }
  if (existsSync(path)) {
    try {
      accessSync(path, constants.R_OK | constants.W_OK);
    } catch {
      throw new ConfigError(`database ${path} is read-only for this user${who}; a sync writes to it. Fix its owner or mode, or choose another --db (status, stock and reconcile only read it)`);
    }
  }
}

/** The database's directory must exist; checked before any request so a typo costs nothing. */
export function checkDirectory(path: string): void {
  const dir = dirname(path);
  if (!existsSync(dir)) {
    throw new ConfigError(`database directory ${dir} does not exist (db: ${path}); create it or choose another --db`);
  }
  if (existsSync(path) && statSync(path).isDirectory()) {
    throw new ConfigError(`db: ${path} is a directory; --db names the database file, e.g. ${join(path, "inventory.db")}`);
  }
}

/**
 * An existing mirror readable by group or others (made by an older release, copied with a
 * loose umask) is tightened to 0600, with its -wal and -shm: they hold the same stock.
 */
function tightenMode(path: string): void {
  for (const p of [path, `${path}-wal`, `${path}-shm`]) {
    if (existsSync(p) && statSync(p).mode & 0o077) chmodSync(p, 0o600);
  }
}

/** Create the file with mode 0600 before SQLite opens it, so the stock never sits in a world-readable file. */
function createOwnerOnly(path: string): void {
  if (existsSync(path)) return;
  const fd = openSync(path, "a", 0o600);
  closeSync(fd);
  chmodSync(path, 0o600);
}

export interface WriterLock {
  release(): void;
}

/** Take the single-writer lock for `dbPath`, or fail at once if another process holds it. */
export function acquireWriterLock(dbPath: string): WriterLock {
  checkDirectory(dbPath);
  const lockPath = `${dbPath}.lock`;
  createOwnerOnly(lockPath);
  const lock = new Database(lockPath);
  try {
    lock.pragma("busy_timeout = 0");
    lock.pragma("locking_mode = EXCLUSIVE");
    lock.pragma("journal_mode = DELETE");
    lock.exec("CREATE TABLE IF NOT EXISTS holder (pid INTEGER, since TEXT)");
    // In EXCLUSIVE locking mode the first write takes the lock and keeps it until close.
    lock.exec("BEGIN EXCLUSIVE");
    lock.prepare("DELETE FROM holder").run();
    lock.prepare("INSERT INTO holder VALUES (?, ?)").run(process.pid, new Date().toISOString());
    lock.exec("COMMIT");
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === "SQLITE_BUSY" || /locked|busy/i.test((err as Error).message)) {
      throw new StoreError(`another inventory-mirror process is writing to ${dbPath} (it holds ${lockPath}); wait for it to finish or stop it. Only one writer per database file.`, {
        cause: err,
        code: "locked",
      });
    }
    throw new StoreError(`cannot take the writer lock ${lockPath}: ${(err as Error).message}`, { cause: err });
  }
  return { release: () => lock.close() };
}
