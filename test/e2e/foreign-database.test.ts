/**
 * `--db` naming another program's file (issue 11, B6 and part of B8): refused before a byte
 * is written, with a message naming the file, exit 2, and nothing left beside it (no
 * -wal/-shm, no .lock). The real CLI; no server is contacted (the base URL is a closed port).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { runCli } from "../helpers/cli.js";

let dir: string;
const env = () => ({ INVENTORY_API_KEY: "imk_foreign_db_test_0123456789", INVENTORY_BASE_URL: "http://127.0.0.1:9" });
const sha1 = (p: string) => createHash("sha1").update(readFileSync(p)).digest("hex");

function sqliteFile(name: string, setup: (db: Database.Database) => void): string {
  const path = join(dir, name);
  const db = new Database(path);
  setup(db);
  db.close();
  return path;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-foreign-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("a database that is not ours", () => {
  const cases: Array<{ what: string; make: () => string; message: RegExp }> = [
    {
      what: "another program's SQLite database (a customers table)",
      make: () => sqliteFile("customers.db", (db) => db.exec("CREATE TABLE customers (id INTEGER, name TEXT); INSERT INTO customers VALUES (1, 'Ada');")),
      message: /customers\.db is not an inventory-mirror database \(it holds tables customers\)/,
    },
    {
      what: "a database with its own skus table and user_version 2",
      make: () => sqliteFile("own-skus.db", (db) => db.exec("CREATE TABLE skus (id TEXT); PRAGMA user_version = 2;")),
      message: /own-skus\.db is not an inventory-mirror database \(it holds tables skus\)/,
    },
    {
      what: "a text file",
      make: () => {
        const p = join(dir, "notes.txt");
        writeFileSync(p, "shopping list\n".repeat(100));
        return p;
      },
      message: /notes\.txt is not an SQLite database/,
    },
  ];
  for (const c of cases) {
    it(`sync refuses ${c.what}: exit 2, the file byte-identical, nothing left beside it`, async () => {
      const path = c.make();
      const before = sha1(path);
      const filesBefore = readdirSync(dir).sort();
      const r = await runCli(["sync", "--db", path], { env: env() });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(c.message);
      expect(sha1(path)).toBe(before);
      expect(readdirSync(dir).sort()).toEqual(filesBefore);
      for (const suffix of ["-wal", "-shm", ".lock"]) expect(existsSync(path + suffix)).toBe(false);
    });
  }

  it("status on another program's database says so and does not advise a sync", async () => {
    const path = join(dir, "customers.db");
    if (!existsSync(path)) sqliteFile("customers.db", (db) => db.exec("CREATE TABLE customers (id INTEGER)"));
    const before = sha1(path);
    const r = await runCli(["status", "--db", path], { env: env() });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/is not an inventory-mirror database/);
    expect(r.stderr).not.toMatch(/sync --full/);
    expect(sha1(path)).toBe(before);
  });

  for (const command of [["status"], ["stock", "--at", "2026-01-01T00:00:00Z"], ["reconcile"]]) {
    it(`${command[0]} on a directory or a text file: exit 2 with the path named and what to do, nothing left beside it`, async () => {
      const sub = join(dir, `a-directory-${command[0]}`);
      mkdirSync(sub);
      const text = join(dir, `notes-${command[0]}.txt`);
      writeFileSync(text, "not a database\n");
      const onDir = await runCli([...command, "--db", sub], { env: env() });
      expect(onDir.code).toBe(2);
      expect(onDir.stderr).toMatch(new RegExp(`${sub.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is a directory; --db names the database file`));
      const onText = await runCli([...command, "--db", text], { env: env() });
      expect(onText.code).toBe(2);
      expect(onText.stderr).toMatch(/notes-.*\.txt is not an SQLite database .*Choose another --db/);
      for (const suffix of ["-wal", "-shm", ".lock"]) expect(existsSync(text + suffix)).toBe(false);
    });
  }

  it("an empty file is still a place for a new mirror (the refusal is about content, not existence)", async () => {
    const path = join(dir, "empty.db");
    writeFileSync(path, "");
    const config = join(dir, "fast.json");
    writeFileSync(config, JSON.stringify({ retry: { maxRetries: 0, backoffBaseMs: 10, backoffCapMs: 10 } }));
    const r = await runCli(["sync", "--db", path, "--config", config], { env: env() });
    // It gets as far as the (closed) server: the database was accepted.
    expect(r.stderr).not.toMatch(/not an inventory-mirror database|not an SQLite database/);
  });
});
