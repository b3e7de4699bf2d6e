/**
 * EXPLAIN QUERY PLAN of every documented query (and so of the views they read) uses an
 * index: no full scan of a table that grows with the workspace. A SCAN of such a table is
 * accepted only through a covering index or the partial index of non-clean leaf rows
 * (which holds only those rows); scans of the small locations tables, of a view's or
 * CTE's own rows and of the full-text index are fine.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { DOCUMENTED_QUERIES } from "../../src/analysis/queries.js";
import { syncFull } from "./helpers.js";

/** Tables that grow with SKUs, history or runs, and the aliases the views and documented queries give them. */
const BIG = new Set(["skus", "s", "history", "h", "sku_location_quantities", "q", "sku_root_quantities", "sku_sync", "sync_journal", "sync_runs", "inventory_snapshots"]);
const ALLOWED_SCAN = /USING COVERING INDEX|USING INDEX slq_not_reflected\b|VIRTUAL TABLE INDEX/;
const USES_INDEX = /USING (COVERING )?INDEX|USING (INTEGER )?PRIMARY KEY|VIRTUAL TABLE INDEX/;

let sim: RunningSimulator;
let dir: string;
let db: Database.Database;
let params: Record<string, string>;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, skus: 60, apiKey: "sim_plans_0a1b2c3d4e5f60718293" });
  dir = mkdtempSync(join(tmpdir(), "im-plans-"));
  const path = join(dir, "plans.db");
  await syncFull(sim, path);
  db = new Database(path, { readonly: true });
  const one = (sql: string) => (db.prepare(sql).get() as { v: string }).v;
  params = {
    sku_id: one("SELECT sku_id AS v FROM sku_location_quantities LIMIT 1"),
    location_id: one("SELECT id AS v FROM locations WHERE is_leaf = 1 LIMIT 1"),
    root_id: one("SELECT id AS v FROM locations WHERE depth = 0 LIMIT 1"),
    section_id: one("SELECT id AS v FROM locations WHERE depth = 1 LIMIT 1"),
    at: "2026-03-01T00:00:00.000Z",
    from: "2026-04-01T00:00:00.000Z",
    to: "2026-05-01T00:00:00.000Z",
    text: "mug",
    code: one("SELECT barcode AS v FROM skus LIMIT 1"),
  };
});
afterAll(async () => {
  db?.close();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

function plan(sql: string, p: Record<string, string>): string[] {
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(p) as Array<{ detail: string }>).map((r) => r.detail);
}

describe("query plans of the documented queries", () => {
  for (const q of DOCUMENTED_QUERIES) {
    it(`${q.id} uses an index and scans no big table`, () => {
      const p = Object.fromEntries(Object.keys(q.params).map((k) => [k, params[k]!]));
      const lines = plan(q.sql, p);
      const fullScans = lines.filter((l) => {
        const m = /^SCAN (\S+)/.exec(l);
        return m !== null && BIG.has(m[1]!) && !ALLOWED_SCAN.test(l);
      });
      expect(fullScans, lines.join("\n")).toEqual([]);
      expect(
        lines.some((l) => USES_INDEX.test(l)),
        lines.join("\n"),
      ).toBe(true);
    });
  }

  it("the check itself catches a full scan (a query without a usable index fails it)", () => {
    const lines = plan("SELECT count(*) FROM history h WHERE h.note = :note", { note: "x" });
    expect(lines.some((l) => /^SCAN h\b/.test(l) && !ALLOWED_SCAN.test(l))).toBe(true);
  });
});
