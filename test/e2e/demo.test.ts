/**
 * `npm start` runs `inventory-mirror demo`: the simulator, a full sync into ./data/demo.db,
 * and example queries. The file must match the simulator (the same seed gives the same
 * workspace), and every query the demo prints must run and answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { createModel } from "../../src/simulator/index.js";
import { runCli, type CliResult } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

let cwd: string;
let r: CliResult;

beforeAll(async () => {
  cwd = mkdtempSync(join(tmpdir(), "im-demo-"));
  r = await runCli(["demo"], { cwd });
});
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

describe("inventory-mirror demo (npm start)", () => {
  it("leaves ./data/demo.db equal to the simulator's workspace (seed 42, 500 SKUs)", () => {
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(join(cwd, "data", "demo.db"), createModel({ seed: 42, skus: 500 }).groundTruth())).toEqual([]);
  });

  it("every sqlite3 query it prints runs and answers", () => {
    const queries = [...r.stdout.matchAll(/sqlite3 -header -column \S+ "(.*)"$/gm)].map((m) => m[1]!.replace(/\\"/g, '"'));
    expect(queries.length).toBe(4);
    const db = new Database(join(cwd, "data", "demo.db"), { readonly: true });
    try {
      for (const q of queries) expect(db.prepare(q).all().length, q).toBeGreaterThan(0);
      // The search finds exactly the current SKUs whose name, codes, barcode, product or brand contain the phrase.
      const found = db.prepare(queries[2]!.replace("LIMIT 10", "")).all() as Array<{ name: string }>;
      const want = db
        .prepare("SELECT name FROM skus WHERE deleted_at IS NULL AND (name || ' ' || product_name || ' ' || product_brand || ' ' || code || ' ' || sku_code || ' ' || barcode) LIKE '%running shoe%'")
        .all();
      expect(found.map((x) => x.name).sort()).toEqual((want as Array<{ name: string }>).map((x) => x.name).sort());
    } finally {
      db.close();
    }
  });

  it("the reconcile it suggests finds the file consistent", async () => {
    const rec = await runCli(["reconcile", "--db", join(cwd, "data", "demo.db")]);
    expect(rec.code, rec.stdout + rec.stderr).toBe(0);
  });
});
