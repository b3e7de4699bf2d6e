/**
 * Leaving no `-wal`/`-shm` beside the database once a process is done with it.
 *
 * SQLite removes both files when the last connection to the database closes, but only if
 * that connection can write: it checkpoints the WAL first. A read-only connection (the
 * daemon's state reads between runs, a /metrics scrape) makes both files appear and can
 * never remove them, so a daemon stopped cleanly after such reads left them behind.
 * `releaseWalFiles` is the last close of a clean stop: one read-write connection that
 * reads (a connection that never read has not opened the WAL and does not checkpoint) and
 * closes. `query_only` keeps it from writing any row; the checkpoint at close still runs.
 * If another process still has the file open (a manual `sync`), nothing happens here and
 * that process removes the files when it closes.
 */
import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { DEFAULTS } from "../core/defaults.js";

/** Open `dbPath` read-write, read, close: as the last connection, this checkpoints and removes -wal and -shm. Never creates the file. */
export function releaseWalFiles(dbPath: string): void {
  if (!existsSync(dbPath)) return;
  const db = new Database(dbPath, { fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${DEFAULTS.busyTimeoutMs}`);
    db.pragma("query_only = ON");
    db.pragma("user_version", { simple: true });
  } finally {
    db.close();
  }
}
