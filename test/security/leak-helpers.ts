/**
 * Where a key could end up after a run, and a search of all of it: the process's output,
 * every file under a directory (raw bytes: the database pages, -wal, -shm, .lock, anything
 * else), and every column of every row of every table of each SQLite file found there.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import Database from "better-sqlite3";

export interface Leak {
  where: string;
  /** The offending text with the needle masked, so a failing test does not print it again. */
  excerpt: string;
}

/** Every regular file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(p));
    else if (entry.isFile()) out.push(p);
  }
  return out;
}

function excerpt(text: string, at: number, needle: string): string {
  return text
    .slice(Math.max(0, at - 80), at + needle.length + 80)
    .split(needle)
    .join("<NEEDLE>")
    .replace(/\s+/g, " ");
}

/** Lines of `text` that contain any needle. */
export function leaksInText(where: string, text: string, needles: readonly (string | RegExp)[]): Leak[] {
  const leaks: Leak[] = [];
  text.split("\n").forEach((line, i) => {
    for (const n of needles) {
      const at = typeof n === "string" ? line.indexOf(n) : line.search(n);
      if (at >= 0) leaks.push({ where: `${where} line ${i + 1}`, excerpt: typeof n === "string" ? excerpt(line, at, n) : line.slice(0, 200).replace(n, "<NEEDLE>") });
    }
  });
  return leaks;
}

/** Raw bytes of every file under `dir` (before any SQLite connection touches them). */
export function leaksInFiles(dir: string, needles: readonly (string | RegExp)[]): Leak[] {
  const leaks: Leak[] = [];
  for (const file of filesUnder(dir)) {
    const bytes = readFileSync(file);
    for (const n of needles) {
      if (typeof n === "string") {
        const at = bytes.indexOf(Buffer.from(n, "utf8"));
        if (at >= 0) leaks.push({ where: `file ${relative(dir, file)} at byte ${at}`, excerpt: excerpt(bytes.toString("latin1"), at, n) });
      } else {
        const text = bytes.toString("latin1");
        const at = text.search(n);
        if (at >= 0) leaks.push({ where: `file ${relative(dir, file)} at byte ${at}`, excerpt: text.slice(Math.max(0, at - 40), at + 80).replace(n, "<NEEDLE>") });
      }
    }
  }
  return leaks;
}

/** Is this file an SQLite database (by its header)? */
function isSqlite(file: string): boolean {
  if (statSync(file).size < 100) return false;
  return readFileSync(file).subarray(0, 16).toString("latin1") === "SQLite format 3\u0000";
}

/**
 * Every value of every column of every table (sqlite_master included) of every SQLite
 * database under `dir`. Opened read-only after the raw scan; a WAL file beside it is read too.
 */
export function leaksInDatabases(dir: string, needles: readonly (string | RegExp)[]): { leaks: Leak[]; tablesScanned: number; rowsScanned: number } {
  const leaks: Leak[] = [];
  let tablesScanned = 0;
  let rowsScanned = 0;
  for (const file of filesUnder(dir).filter((f) => !/-(wal|shm|journal)$/.test(f) && isSqlite(f))) {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as Array<{ name: string }>).map((t) => t.name);
      for (const table of ["sqlite_master", ...tables]) {
        tablesScanned++;
        for (const row of db.prepare(`SELECT * FROM "${table.replace(/"/g, '""')}"`).iterate() as Iterable<Record<string, unknown>>) {
          rowsScanned++;
          for (const [column, value] of Object.entries(row)) {
            const text = Buffer.isBuffer(value) ? value.toString("latin1") : typeof value === "string" ? value : null;
            if (text === null) continue;
            for (const n of needles) {
              const at = typeof n === "string" ? text.indexOf(n) : text.search(n);
              if (at >= 0) leaks.push({ where: `${relative(dir, file)}: table ${table}, column ${column}`, excerpt: typeof n === "string" ? excerpt(text, at, n) : "<regex match>" });
            }
          }
        }
      }
    } finally {
      db.close();
    }
  }
  return { leaks, tablesScanned, rowsScanned };
}

export function formatLeaks(leaks: readonly Leak[]): string {
  return leaks.map((l) => `  ${l.where}: ${l.excerpt}`).join("\n");
}
