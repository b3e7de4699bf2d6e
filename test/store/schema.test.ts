/** schema.sql is the single source of truth: it equals what the program creates, and it runs. */
import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { openDatabase, loadMigrations } from "../../src/store/db.js";
import { dumpSchema } from "../../src/store/schema-dump.js";

const SCHEMA = readFileSync(new URL("../../schema.sql", import.meta.url), "utf8");

describe("schema.sql", () => {
  it("equals, exactly, the schema of a database the program creates", () => {
    const dir = mkdtempSync(join(tmpdir(), "im-schema-"));
    try {
      const db = openDatabase(join(dir, "a.db"));
      expect(dumpSchema(db)).toBe(SCHEMA);
      expect(db.pragma("user_version", { simple: true })).toBe(loadMigrations().length);
      db.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("creates that same schema when run on its own (e.g. by the sqlite3 shell)", () => {
    const db = new Database(":memory:");
    db.exec(SCHEMA);
    expect(dumpSchema(db)).toBe(SCHEMA);
    db.close();
  });
});
