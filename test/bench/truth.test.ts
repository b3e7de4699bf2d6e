/**
 * The comparison with the simulator's ground truth (src/bench/truth.ts), which the bench and
 * every e2e test (through test/helpers/ground-truth.ts) rely on: a mirror written by the real
 * CLI from the real simulator compares equal, and a copy of it spoilt in one way at a time
 * shows exactly that difference. A check that missed one of these would let a broken sync
 * pass every e2e test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type GroundTruth, type RunningSimulator } from "../../src/simulator/index.js";
import { compareWithTruth } from "../../src/bench/truth.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth, multisetMinus, tableCounts } from "../helpers/ground-truth.js";

const KEY = "sim_truth_test_8e1d2c3b4a5f6e7d8c9b0a1f";
let sim: RunningSimulator;
let dir: string;
let mirror: string;
let truth: GroundTruth;
let copies = 0;

beforeAll(async () => {
  // identicalRows: some SKUs hold two rows identical in every field (the multiset case).
  sim = await startSimulator({ seed: 11, skus: 40, historyDepth: 12, identicalRows: 3, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-truth-"));
  mirror = join(dir, "mirror.db");
  const r = await runCli(["sync", "--full"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: mirror } });
  expect(r.code).toBe(0);
  truth = sim.groundTruth();
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A copy of the mirror with `spoil` applied to it. */
async function spoilt(spoil: (db: Database.Database) => void): Promise<string> {
  const path = join(dir, `copy-${++copies}.db`);
  const source = new Database(mirror, { readonly: true });
  await source.backup(path);
  source.close();
  const db = new Database(path);
  spoil(db);
  db.close();
  return path;
}

const someSku = () => truth.skus.find((s) => s.detail.locations.length > 0 && s.history.length > 0)!;

describe("diffAgainstTruth", () => {
  it("finds nothing on a mirror the CLI wrote, with identical history rows stored as copies", () => {
    const copied = truth.skus.filter((s) => new Set(s.history.map((h) => JSON.stringify(h))).size < s.history.length);
    expect(copied.length).toBeGreaterThan(0);
    expect(diffAgainstTruth(mirror, truth)).toEqual([]);
    expect(tableCounts(mirror).history).toBe(truth.skus.reduce((n, s) => n + s.history.length, 0));
  });

  it("counts history as a multiset: one missing copy of an identical row is a difference", async () => {
    const path = await spoilt((db) => db.prepare("DELETE FROM history WHERE rowid = (SELECT min(rowid) FROM history WHERE dup_index = 1)").run());
    const diffs = diffAgainstTruth(path, truth);
    expect(diffs).toHaveLength(1);
    expect(diffs[0]).toMatch(/^SKU \S+ history: \d+ rows stored, \d+ in truth \(1 missing, 0 extra\)$/);
  });

  it("sees a changed leaf quantity, in the table and in the stock_by_location view", async () => {
    const sku = someSku();
    const path = await spoilt((db) => db.prepare("UPDATE sku_location_quantities SET quantity = quantity + 1 WHERE sku_id = ?").run(sku.item.id));
    const diffs = diffAgainstTruth(path, truth);
    expect(diffs.some((d) => d.startsWith(`SKU ${sku.item.id} leaf quantities:`))).toBe(true);
    expect(diffs.some((d) => d.startsWith(`SKU ${sku.item.id} stock_by_location:`))).toBe(true);
  });

  it("sees a leaf's own fields (its name as stored beside the quantity)", async () => {
    const sku = someSku();
    const path = await spoilt((db) => db.prepare("UPDATE sku_location_quantities SET location_name = 'renamed' WHERE sku_id = ?").run(sku.item.id));
    expect(diffAgainstTruth(path, truth)).toEqual([expect.stringMatching(new RegExp(`^SKU ${sku.item.id} leaf quantities:`))]);
  });

  it("sees a location's path, a SKU's product brand and a root quantity", async () => {
    const sku = someSku();
    const path = await spoilt((db) => {
      db.prepare("UPDATE locations SET display_path = 'elsewhere' WHERE id = ?").run(truth.locations[0]!.id);
      db.prepare("UPDATE skus SET product_brand = 'other' WHERE id = ?").run(sku.item.id);
      db.prepare("UPDATE sku_root_quantities SET quantity = quantity + 5 WHERE sku_id = ?").run(sku.item.id);
    });
    const diffs = diffAgainstTruth(path, truth);
    expect(diffs).toContainEqual(expect.stringMatching(new RegExp(`^location ${truth.locations[0]!.id}:`)));
    expect(diffs).toContainEqual(expect.stringMatching(new RegExp(`^SKU ${sku.item.id} fields:`)));
    expect(diffs).toContainEqual(expect.stringMatching(new RegExp(`^SKU ${sku.item.id} root quantities:`)));
  });

  it("sees a SKU the mirror holds as deleted", async () => {
    const sku = someSku();
    const path = await spoilt((db) => db.prepare("UPDATE skus SET deleted_at = '2026-01-01T00:00:00.000Z' WHERE id = ?").run(sku.item.id));
    expect(diffAgainstTruth(path, truth)).toEqual([`current SKU count: got ${truth.skus.length - 1}, want ${truth.skus.length}`, `SKU ${sku.item.id} missing`]);
  });
});

describe("compareWithTruth (the bench's report)", () => {
  it("gives the same verdict with a count and the first differences", async () => {
    expect(compareWithTruth(mirror, truth)).toEqual({ equal: true, differences: 0, sample: [] });
    const path = await spoilt((db) => db.prepare("UPDATE sku_location_quantities SET quantity = quantity + 1").run());
    const check = compareWithTruth(path, truth);
    const all = diffAgainstTruth(path, truth);
    expect(check.equal).toBe(false);
    expect(check.differences).toBe(all.length);
    expect(check.sample).toEqual(all.slice(0, 5).map((d) => d.slice(0, 300)));
  });
});

describe("multisetMinus", () => {
  it("removes one occurrence per element", () => {
    expect(multisetMinus(["a", "a", "b"], ["a"])).toEqual(["a", "b"]);
    expect(multisetMinus(["a"], ["a", "a"])).toEqual([]);
  });
});
