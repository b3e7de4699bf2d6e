/**
 * `inventory-mirror sync` (incremental) end to end: each way a real workspace changes,
 * applied to the simulator between runs; the next run (or, for what the list cannot
 * show, the cycles within the re-verification window) brings the database back equal
 * to ground truth, and the requests it used are counted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_incr_7d6c5b4a39281706f5e4d3c2";
const SKUS = 150;
let sim: RunningSimulator;
let dir: string;
let db: string;
let config: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, skus: SKUS, historyDepth: 15, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-incr-"));
  db = join(dir, "incr.db");
  config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ sync: { reverifyWindowHours: 24, historyOverlapRows: 5 } }));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

type RunRow = Record<string, number | string | null>;
function lastRun(path = db): RunRow {
  const d = new Database(path, { readonly: true });
  try {
    return d.prepare("SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1").get() as RunRow;
  } finally {
    d.close();
  }
}
async function sync(args: string[] = [], path = db, cfg = config) {
  sim.resetStats();
  const r = await runCli(["sync", "--config", cfg, ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: path } });
  return { ...r, run: lastRun(path), stats: sim.stats() };
}
const planned = (run: RunRow) => Number(run.skus_new) + Number(run.skus_changed) + Number(run.skus_repolled) + Number(run.skus_retried) + Number(run.skus_reverified);
const someLeafWithStock = (skuId: string) => {
  const t = sim.groundTruth().skus.find((s) => s.item.id === skuId)!;
  return (t.detail.locations ?? []).find((l) => l.quantity > 0 && l.freshness?.status === "clean")!.id;
};
const skuWithCleanStock = (exclude: string[] = []) =>
  sim
    .groundTruth()
    .skus.find(
      (s) =>
        !exclude.includes(s.item.id) &&
        (s.detail.locations ?? []).some((l) => l.quantity > 2 && l.freshness?.status === "clean") &&
        (s.detail.locations ?? []).every((l) => l.freshness?.status === "clean"),
    )!.item.id;

/** The SKUs an incremental run re-verified (fetched in its walk, not among `repolledIds`) and their history pages, from ground truth. */
function reverifiedIn(run: RunRow, repolledIds: string[]) {
  const d = new Database(db, { readonly: true });
  const fetched = (d.prepare("SELECT sku_id FROM sku_sync WHERE fetched_walk_id = ?").all(run.walk_id) as Array<{ sku_id: string }>).map((x) => x.sku_id);
  d.close();
  const reverifiedIds = fetched.filter((id) => !repolledIds.includes(id));
  expect(reverifiedIds.length).toBe(Number(run.skus_reverified));
  const rows = new Map(sim.groundTruth().skus.map((s) => [s.item.id, s.history.length]));
  const reverifiedHistoryPages = reverifiedIds.reduce((sum, id) => sum + Math.max(1, Math.ceil(rows.get(id)! / 100)), 0);
  return { reverifiedIds, reverifiedHistoryPages };
}
/** SKUs the database holds with some leaf not clean (the next incremental run re-polls them). */
function storedNotClean(): string[] {
  const d = new Database(db, { readonly: true });
  try {
    return (d.prepare("SELECT DISTINCT sku_id FROM sku_location_quantities WHERE freshness_status IS NOT 'clean'").all() as Array<{ sku_id: string }>).map((x) => x.sku_id);
  } finally {
    d.close();
  }
}

describe("sync (incremental)", () => {
  it("on an empty database behaves as --full: ends equal to ground truth", async () => {
    const r = await sync();
    expect(r.code).toBe(0);
    expect(r.run).toMatchObject({ mode: "incremental", status: "succeeded", skus_new: SKUS });
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("an unchanged workspace costs the list walk, one request per re-polled SKU, and the re-verified SKUs' detail and history", async () => {
    const r = await sync();
    expect(r.code).toBe(0);
    expect(r.run).toMatchObject({ skus_new: 0, skus_changed: 0, skus_retried: 0 });
    // Re-polled: exactly the SKUs whose stored freshness is not clean.
    const truth = sim.groundTruth();
    const notCleanIds = truth.skus.filter((s) => (s.detail.locations ?? []).some((l) => l.freshness?.status !== "clean")).map((s) => s.item.id);
    const repolled = Number(r.run.skus_repolled);
    expect(repolled).toBe(notCleanIds.length);
    expect(repolled).toBeGreaterThan(0);
    const listPages = Math.ceil(SKUS / 100);
    expect(r.stats.byEndpoint.list).toBe(listPages);
    expect(r.stats.byEndpoint.detail).toBe(planned(r.run));
    // Their detail did not change, so each re-polled SKU cost exactly its detail request: the
    // only history requests are the re-verified SKUs' (every page of each, from ground truth).
    const { reverifiedIds, reverifiedHistoryPages } = reverifiedIn(r.run, notCleanIds);
    expect(r.stats.byEndpoint.history).toBe(reverifiedHistoryPages);
    // workspace + locations + list pages + one detail per re-polled SKU + the re-verified SKUs' detail and history.
    expect(r.stats.requests).toBe(2 + listPages + repolled + reverifiedIds.length + reverifiedHistoryPages);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("a re-polled SKU whose detail moved (a lagging leaf settled to the same quantity) also walks its history", async () => {
    // A non-clean leaf whose unreflected rows net to zero would settle without a list change; simplest
    // to build: mark a clean leaf dirty after a row, so the freshness (not the list) changes on settle.
    const id = skuWithCleanStock();
    const leaf = someLeafWithStock(id);
    sim.model.markDirty(id, leaf);
    sim.model.movement(id, leaf, 3);
    sim.model.movement(id, leaf, -3);
    // The list (reflected quantities) shows nothing, and the SKU was stored clean: not fetched.
    const blind = await sync();
    expect(blind.run.skus_changed).toBe(0);
    // It is reverified at some point, and then stored not clean; from then on it is re-polled.
    let cycles = 0;
    const stored = () => {
      const d = new Database(db, { readonly: true });
      try {
        return d.prepare("SELECT freshness_status FROM sku_location_quantities WHERE sku_id = ? AND location_id = ?").get(id, leaf) as { freshness_status: string } | undefined;
      } finally {
        d.close();
      }
    };
    while (stored()?.freshness_status === "clean" && cycles < 3) {
      const cfg = join(dir, "reverify-all.json");
      writeFileSync(cfg, JSON.stringify({ sync: { reverifyWindowHours: 0.0001, historyOverlapRows: 5 } }));
      await sync([], db, cfg);
      cycles++;
    }
    expect(stored()?.freshness_status).toBe("dirty");
    sim.model.settle(id, leaf);
    const repolledIds = storedNotClean();
    expect(repolledIds).toContain(id);
    const r = await sync();
    expect(r.code).toBe(0);
    expect(r.run.skus_changed).toBe(0);
    expect(Number(r.run.skus_repolled)).toBe(repolledIds.length);
    // The settled SKU's detail changed (freshness, last replay): its history was walked too,
    // on top of the re-verified SKUs' history; the other re-polled SKUs cost their detail only.
    const { reverifiedHistoryPages } = reverifiedIn(r.run, repolledIds);
    expect(r.stats.byEndpoint.history).toBe(reverifiedHistoryPages + 1);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  const cases: Array<[string, () => string[]]> = [
    [
      "a movement",
      () => {
        const id = skuWithCleanStock();
        sim.model.movement(id, someLeafWithStock(id), -1);
        return [id];
      },
    ],
    [
      "a renamed SKU",
      () => {
        const id = sim.model.skuIds()[3]!;
        sim.model.renameSku(id, "Renamed in the source system");
        return [id];
      },
    ],
    ["a new SKU", () => [sim.model.addSku({ name: "Brand new SKU" })]],
    [
      "a late row with an older occurredAt",
      () => {
        const id = skuWithCleanStock();
        sim.model.lateRow(id, someLeafWithStock(id), 3, 1_000);
        return [id];
      },
    ],
  ];
  for (const [name, mutate] of cases) {
    it(`${name}: the next run fetches that SKU and ends equal to ground truth`, async () => {
      const changed = mutate();
      const r = await sync();
      expect(r.code).toBe(0);
      expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
      // Detail is fetched for the changed SKU, plus only re-polls and re-verifications.
      expect(r.stats.byEndpoint.detail).toBe(planned(r.run));
      expect(Number(r.run.skus_changed) + Number(r.run.skus_new)).toBeLessThanOrEqual(changed.length);
      expect(Number(r.run.skus_changed) + Number(r.run.skus_new) + Number(r.run.skus_repolled)).toBeGreaterThanOrEqual(changed.length);
    });
  }

  it("freshness going dirty is invisible to the list; when it settles the list shows it and the next run catches up", async () => {
    const id = skuWithCleanStock();
    const leaf = someLeafWithStock(id);
    sim.model.markDirty(id, leaf);
    sim.model.movement(id, leaf, 2);
    // The projection lags: the list (quantities) does not change, so nothing is fetched for it.
    const blind = await sync();
    expect(blind.run.skus_changed).toBe(0);
    sim.model.settle(id, leaf);
    const r = await sync();
    expect(r.code).toBe(0);
    expect(Number(r.run.skus_changed)).toBeGreaterThanOrEqual(1);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("SKUs stored with freshness not clean are re-polled every run until clean, then no more", async () => {
    const before = await sync();
    expect(Number(before.run.skus_repolled)).toBeGreaterThan(0);
    sim.model.settle();
    const r = await sync();
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const after = await sync();
    expect(after.run.skus_repolled).toBe(0);
  });

  it("a removed SKU is marked deleted by the next walk, its detail's 404 confirming it, keeping its history", async () => {
    const id = sim.model.skuIds()[10]!;
    sim.model.removeSku(id);
    const r = await sync();
    expect(r.code).toBe(0);
    expect(Number(r.run.skus_deleted)).toBe(1);
    const d = new Database(db, { readonly: true });
    expect(d.prepare("SELECT deleted_at IS NOT NULL AS deleted, missed_walks FROM skus WHERE id = ?").get(id)).toEqual({ deleted: 1, missed_walks: 1 });
    expect((d.prepare("SELECT count(*) AS n FROM history WHERE sku_id = ?").get(id) as { n: number }).n).toBeGreaterThan(0);
    d.close();
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("what the list cannot show (a transfer inside one root, a SET confirming the same count) is caught by rotating re-verification within the window", async () => {
    const cfg = join(dir, "rotate.json");
    // A 3-minute window: with runs a minute apart (the shortest cadence counted), a third of the SKUs per cycle.
    writeFileSync(cfg, JSON.stringify({ sync: { reverifyWindowHours: 0.05 } }));
    const leaves = sim.groundTruth().locations.filter((l) => l.isLeaf && l.status === "active");
    const id = skuWithCleanStock();
    const from = someLeafWithStock(id);
    const root = leaves.find((l) => l.id === from)!.pathIds![0];
    const to = leaves.find((l) => l.id !== from && l.pathIds![0] === root)!.id;
    sim.model.transfer(id, from, to, 1);
    const id2 = skuWithCleanStock([id]);
    const leaf2 = someLeafWithStock(id2);
    sim.model.set(id2, leaf2, sim.model.balance(id2, leaf2));

    let cycles = 0;
    let reverified = 0;
    const before = sim.groundTruth().skus.length;
    while (cycles < 5 && diffAgainstTruth(db, sim.groundTruth()).length > 0) {
      const r = await sync([], db, cfg);
      expect(r.code).toBe(0);
      expect(r.run.skus_changed).toBe(0); // the list showed nothing
      reverified += Number(r.run.skus_reverified);
      cycles++;
    }
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    expect(cycles).toBeLessThanOrEqual(4);
    expect(reverified).toBeLessThanOrEqual(before + 5);
  });

  it("--max-requests ends a run as partial with its work queued; later runs converge", async () => {
    const path = join(dir, "budget.db");
    const first = await sync(["--max-requests", "40"], path);
    expect(first.stats.requests).toBeLessThanOrEqual(40);
    expect(first.run).toMatchObject({ status: "partial", request_budget: 40 });
    expect(first.code).toBe(0);
    expect(first.stderr + first.stdout).toMatch(/budget/);
    let runs = 1;
    while (lastRun(path).status !== "succeeded" && runs < 30) {
      const r = await sync(["--max-requests", "40"], path);
      expect(r.stats.requests).toBeLessThanOrEqual(40);
      runs++;
    }
    expect(lastRun(path).status).toBe("succeeded");
    expect(diffAgainstTruth(path, sim.groundTruth())).toEqual([]);
  });
});
