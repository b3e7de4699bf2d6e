/**
 * Issue 4's "Done when": on a 10,000-SKU workspace with 1% of the SKUs changed between
 * cycles, an incremental sync uses at most (list pages + 2.2 × changed SKUs + the rotating
 * share) requests and ends equal to ground truth.
 *
 * The changes are the ones the list shows (movements, SETs to a new count, renames, late
 * rows that change the quantity, new SKUs): what the list cannot show is the rotating
 * re-verification's job, proven over several cycles in incremental.test.ts. Removed SKUs
 * are left out here because they are marked deleted only after a second walk.
 *
 * Also here, on a workspace with deep histories: a late row deeper than the lookback
 * overlap is found (the history no longer adds up, so the SKU's whole history is walked),
 * and a complete walk drops a stored row the server rewrote (a SET whose delta changed).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { createRng } from "../../src/simulator/prng.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_scale_0a1b2c3d4e5f60718293a4b5";
type RunRow = Record<string, number | string | null>;
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-scale-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function lastRun(path: string): RunRow {
  const d = new Database(path, { readonly: true });
  try {
    return d.prepare("SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1").get() as RunRow;
  } finally {
    d.close();
  }
}
async function sync(sim: RunningSimulator, db: string, config: string, args: string[] = []) {
  sim.resetStats();
  const r = await runCli(["sync", "--config", config, ...args], {
    env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db },
    timeoutMs: 170_000,
  });
  return { ...r, run: lastRun(db), stats: sim.stats() };
}

describe("incremental sync at 10,000 SKUs with 1% churn", () => {
  const N = 10_000;
  let sim: RunningSimulator;
  let db: string;
  let config: string;

  beforeAll(async () => {
    // Shallow histories (one page per SKU) keep the full sync short; all freshness clean, so
    // no SKU is re-polled and every planned SKU is explained by the churn or the rotation.
    sim = await startSimulator({ seed: 404, skus: N, historyDepth: 6, apiKey: KEY });
    sim.model.settle();
    db = join(dir, "scale.db");
    config = join(dir, "scale.json");
    writeFileSync(config, JSON.stringify({ concurrency: 8, sync: { reverifyWindowHours: 24 } }));
  });
  afterAll(async () => sim?.close());

  it("uses at most list pages + 2.2 × changed + the rotating share, and ends equal to ground truth", async () => {
    const full = await sync(sim, db, config, ["--full"]);
    expect(full.code, full.stderr).toBe(0);

    // 1% of the SKUs, changed in ways the list shows.
    const rng = createRng(7, "scale-churn", 0);
    const truth = sim.groundTruth();
    const picked = new Set<string>();
    while (picked.size < N / 100 - 10) picked.add(truth.skus[rng.int(truth.skus.length)]!.item.id);
    const bySku = new Map(truth.skus.map((s) => [s.item.id, s]));
    const leaves = sim.model.activeLeafIds();
    let i = 0;
    for (const id of picked) {
      const t = bySku.get(id)!;
      const stocked = t.detail.locations.filter((l) => l.quantity > 0);
      switch (i++ % 4) {
        case 0:
          sim.model.movement(id, leaves[rng.int(leaves.length)]!, rng.range(1, 20));
          break;
        case 1: {
          const leaf = stocked.length ? stocked[rng.int(stocked.length)]!.id : leaves[0]!;
          sim.model.set(id, leaf, sim.model.balance(id, leaf) + rng.range(1, 5));
          break;
        }
        case 2:
          sim.model.renameSku(id, `${t.item.name} (renamed)`);
          break;
        case 3: {
          // A late receipt dated before every row: it changes the quantity unless a SET at that
          // leaf pins it, so it goes to a leaf without a SET.
          const withoutSet = leaves.filter((l) => !t.history.some((r) => r.locationId === l && r.kind === "set"));
          sim.model.lateRow(id, withoutSet[rng.int(withoutSet.length)]!, rng.range(1, 9), 400 * 86_400_000);
          break;
        }
      }
    }
    const added: string[] = [];
    for (let k = 0; k < 10; k++) {
      const id = sim.model.addSku({ name: `Scale test new SKU ${k}` });
      sim.model.movement(id, leaves[k % leaves.length]!, 5 + k);
      added.push(id);
    }
    const changed = picked.size + added.length;
    expect(changed).toBe(N / 100);

    const r = await sync(sim, db, config);
    expect(r.code, r.stderr).toBe(0);
    expect(r.run).toMatchObject({ mode: "incremental", status: "succeeded", skus_new: added.length, skus_changed: picked.size, skus_repolled: 0, skus_retried: 0 });

    // The rotating share: ceil(N × cycle / window), the cycle unknown after a full sync (5 min).
    const reverified = Number(r.run.skus_reverified);
    expect(reverified).toBe(Math.ceil(((N + added.length) * 5) / (24 * 60)));
    const listPages = Math.ceil((N + added.length) / 100);
    // The rotating share in requests: what the re-verified SKUs (fetched in this walk but not
    // changed) cost, detail plus every page of their history, counted from ground truth.
    const rows = new Map(sim.groundTruth().skus.map((s) => [s.item.id, s.history.length]));
    const d = new Database(db, { readonly: true });
    const fetched = (d.prepare("SELECT sku_id FROM sku_sync WHERE fetched_walk_id = ?").all(r.run.walk_id) as Array<{ sku_id: string }>).map((x) => x.sku_id);
    d.close();
    const rotated = fetched.filter((id) => !picked.has(id) && !added.includes(id));
    expect(rotated.length).toBe(reverified);
    const rotatingShare = rotated.reduce((sum, id) => sum + 1 + Math.max(1, Math.ceil(rows.get(id)! / 100)), 0);
    expect(r.stats.byEndpoint.list).toBe(listPages);
    expect(r.stats.byEndpoint.detail).toBe(changed + reverified);
    expect(r.stats.requests).toBeLessThanOrEqual(listPages + 2.2 * changed + rotatingShare);
    expect(Number(r.run.requests)).toBe(r.stats.requests);

    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});

describe("history a lookback cannot see", () => {
  let sim: RunningSimulator;
  let db: string;
  let config: string;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 405, skus: 40, historyDepth: 400, apiKey: KEY });
    sim.model.settle();
    db = join(dir, "deep.db");
    config = join(dir, "deep.json");
    // A short overlap, so that a row 300 deep is well past it.
    writeFileSync(config, JSON.stringify({ sync: { reverifyWindowHours: 24 * 365, historyOverlapRows: 5 } }));
    const r = await sync(sim, db, config, ["--full"]);
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => sim?.close());

  /**
   * The SKU × leaf with the most rows above the leaf's newest SET (all its rows when it has
   * none), and the instant just after that SET: a late row there changes the quantity and
   * sits below all those rows.
   */
  function deepSpot(): { id: string; leaf: string; at: number; above: number; rows: number } {
    let best = { id: "", leaf: "", at: 0, above: -1, rows: 0 };
    for (const s of sim.groundTruth().skus) {
      const t = s.history.map((r) => Date.parse(r.occurredAt));
      for (const l of s.detail.locations) {
        const sets = s.history.flatMap((r, i) => (r.locationId === l.id && r.kind === "set" ? [t[i]!] : []));
        const at = sets.length ? Math.max(...sets) + 1 : t.at(-1)! + 1;
        const above = t.filter((x) => x > at).length;
        if (above > best.above) best = { id: s.item.id, leaf: l.id, at, above, rows: s.history.length };
      }
    }
    return best;
  }

  it("a late row deeper than the lookback overlap: the history no longer adds up, so the whole history is walked", async () => {
    const { id, leaf } = deepSpot();
    // Bury the leaf's newest SET under 150 newer rows, and mirror them.
    for (let k = 0; k < 150; k++) sim.model.movement(id, leaf, 1);
    expect((await sync(sim, db, config)).code).toBe(0);
    const { at, above, rows } = deepSpot();
    expect(above).toBeGreaterThanOrEqual(150);
    const newest = Date.parse(sim.groundTruth().skus.find((s) => s.item.id === id)!.history[0]!.occurredAt);
    sim.model.lateRow(id, leaf, 4, newest - at);
    const r = await sync(sim, db, config);
    expect(r.code, r.stderr).toBe(0);
    expect(r.run).toMatchObject({ skus_changed: 1 });
    // The newest page first, then every page of the whole history.
    expect(r.stats.byEndpoint.history).toBeGreaterThanOrEqual(1 + Math.ceil(rows / 100));
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("a complete walk drops a stored row the server rewrote (a late row before a SET changes that SET's delta)", async () => {
    const s = sim.groundTruth().skus.find((x) => x.history.some((r) => r.kind === "set"))!;
    const set = s.history.find((r) => r.kind === "set")!;
    const before = Date.parse(s.history[0]!.occurredAt) - Date.parse(set.occurredAt);
    sim.model.lateRow(s.item.id, set.locationId, 2, before + 3_600_000);
    const rewritten = sim
      .groundTruth()
      .skus.find((x) => x.item.id === s.item.id)!
      .history.find((r) => r.kind === "set" && r.occurredAt === set.occurredAt)!;
    expect(rewritten.quantity).not.toBe(set.quantity);

    const r = await sync(sim, db, config, ["--full"]);
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});
