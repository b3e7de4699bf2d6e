/**
 * History is a multiset (issue 10 §1): two history rows identical in every field (one event
 * with two equal lines) are two rows, and both count. Against the simulator's
 * `history-identical-rows` and `history-ties` profiles, the real CLI stores every copy: a pair
 * inside one page, a pair split by the page boundary (rows 100/101 at limit 100), a pair among
 * ~150 rows sharing one occurredAt; a rerun adds 0 rows; an incremental walk whose overlap
 * window holds a stored pair adds nothing for it; a new identical copy arriving later is
 * added; a run killed between the pages of such a SKU resumes to ground truth; and reconcile
 * flags a SKU whose history lost one copy.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import Database from "better-sqlite3";
import { startSimulator, type GroundTruthSku, type RunningSimulator } from "../../src/simulator/index.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import type { ReconcileReport } from "../../src/analysis/reconcile.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth, tableCounts } from "../helpers/ground-truth.js";
import { consistencyProblems, lastRun, startFullSync, withDb } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_copies_5a4b3c2d1e0f9a8b7c6d5e4f";
const SKUS = 40;
let sim: RunningSimulator;
let dir: string;
let db: string;
let config: string;

/** The SKUs history-variance.ts reshapes, by creation ordinal: 3 page, 4 boundary, 5 ties (pairs), 6 a tie run. */
const ROLE_IDX = { page: 3, boundary: 4, ties: 5, tieRun: 6 } as const;
const skuOf = (idx: number) => sim.model.state.skus.find((s) => s.idx === idx)!.id;
const truthOf = (id: string): GroundTruthSku => sim.groundTruth().skus.find((s) => s.item.id === id)!;
/** Newest-first positions of the rows that have an identical row earlier in the list. */
const copyPositions = (t: GroundTruthSku) => {
  const keys = t.history.map((r) => JSON.stringify(r));
  return keys.flatMap((k, i) => (keys.indexOf(k) !== i ? [i] : []));
};
const storedRows = (id: string, path = db) => withDb(path, (d) => (d.prepare("SELECT count(*) AS n FROM history WHERE sku_id = ?").get(id) as { n: number }).n);

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, skus: SKUS, historyDepth: 15, apiKey: KEY, ...profileOptions(["history-identical-rows", "history-ties"]) });
  dir = mkdtempSync(join(tmpdir(), "im-copies-"));
  db = join(dir, "copies.db");
  config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ sync: { reverifyWindowHours: 24, historyOverlapRows: 5 } }));
});
afterEach(() => sim.setFaults([]));
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

const spawned: ChildProcess[] = [];
afterEach(() => {
  for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

async function sync(args: string[], path = db) {
  sim.resetStats();
  const r = await runCli(["sync", "--config", config, "--no-progress", ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: path } });
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return { ...r, run: lastRun(path), stats: sim.stats() };
}

describe("identical history rows", () => {
  it("the simulator serves them where the test expects: a pair in one page, at rows 100/101, among ~150 ties", () => {
    expect(copyPositions(truthOf(skuOf(ROLE_IDX.page)))).toEqual([3]);
    expect(copyPositions(truthOf(skuOf(ROLE_IDX.boundary)))).toEqual([100]);
    const ties = truthOf(skuOf(ROLE_IDX.ties));
    expect(copyPositions(ties)).toEqual([121]);
    const at = ties.history[121]!.occurredAt;
    expect(ties.history.filter((r) => r.occurredAt === at).length).toBeGreaterThanOrEqual(150);
  });

  it("sync --full stores every copy: equal to ground truth with history compared as a multiset", async () => {
    const r = await sync(["--full"]);
    expect(r.run.status).toBe("succeeded");
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    for (const idx of [ROLE_IDX.page, ROLE_IDX.boundary, ROLE_IDX.ties, ROLE_IDX.tieRun]) {
      const id = skuOf(idx);
      expect(storedRows(id)).toBe(truthOf(id).history.length);
    }
  });

  it("a rerun of sync --full adds 0 rows and changes no count", async () => {
    const before = tableCounts(db);
    const r = await sync(["--full"]);
    expect(r.run.history_rows_added).toBe(0);
    expect(tableCounts(db)).toEqual(before);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("an incremental walk whose overlap window holds a stored pair adds only the new row, not a third copy", async () => {
    const id = skuOf(ROLE_IDX.page);
    const pairRow = truthOf(id).history[3]!;
    const leaf = truthOf(id).detail.locations!.find((l) => l.id === pairRow.locationId)!;
    expect(leaf.freshness?.status).toBe("clean");
    sim.model.movement(id, leaf.id, 4);
    const r = await sync([]);
    expect(Number(r.run.skus_changed)).toBeGreaterThanOrEqual(1);
    // Walked newest first: the new row, then the stored pair (positions 3 and 4 now) within the overlap of 5.
    expect(r.run.history_rows_added).toBe(1);
    expect(storedRows(id)).toBe(truthOf(id).history.length);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("a new identical copy arriving later is added (three copies stored)", async () => {
    const id = skuOf(ROLE_IDX.page);
    const at = copyPositions(truthOf(id))[0]!;
    sim.model.identicalCopy(id, at);
    expect(copyPositions(truthOf(id)).length).toBe(2);
    const r = await sync([]);
    expect(r.run.history_rows_added).toBe(1);
    expect(storedRows(id)).toBe(truthOf(id).history.length);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const again = await sync([]);
    expect(again.run.history_rows_added).toBe(0);
  });

  it("a run killed between the history pages of the SKU whose pair spans them leaves no half SKU; the resumed run ends equal to ground truth", async () => {
    const path = join(dir, "killed.db");
    const truth = sim.groundTruth();
    const id = skuOf(ROLE_IDX.boundary);
    // Page one of that SKU's history is served; page two (with the second copy) is held until the kill.
    sim.setFaults([{ kind: "slow", endpoint: "history", skuId: id, after: 1, count: 1, delayMs: 60_000 }]);
    sim.resetStats();
    const p = startFullSync(path, sim.baseUrl, KEY);
    spawned.push(p.child);
    let exited = false;
    void p.closed.then(() => (exited = true));
    while (!(sim.stats().faultsFired.slow ?? 0) && !exited) await new Promise((r) => setTimeout(r, 10));
    p.child.kill("SIGKILL");
    const end = await p.closed;
    expect(end.signal, p.out()).toBe("SIGKILL");
    const killedWalk = lastRun(path).walk_id;
    expect(consistencyProblems(path, truth)).toEqual([]);
    expect(storedRows(id, path)).toBe(0);

    sim.setFaults([]);
    const r = await sync(["--full"], path);
    expect(r.run.status).toBe("succeeded");
    expect(r.run.walk_id).toBe(killedWalk);
    expect(diffAgainstTruth(path, sim.groundTruth())).toEqual([]);
    expect(storedRows(id, path)).toBe(truth.skus.find((s) => s.item.id === id)!.history.length);
  });

  it("reconcile flags a SKU whose history lost one copy (exit 1), and the next sync --full adds it back", async () => {
    const clean = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: db } });
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    const copy = join(dir, "lost-copy.db");
    copyFileSync(db, copy);
    const id = skuOf(ROLE_IDX.page);
    const w = new Database(copy);
    const deleted = w.prepare("DELETE FROM history WHERE sku_id = ? AND dup_index = (SELECT max(dup_index) FROM history WHERE sku_id = ?)").run(id, id);
    w.close();
    expect(deleted.changes).toBe(1);
    const r = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: copy } });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as ReconcileReport;
    const unexplained = report.mismatches.filter((m) => !m.explained);
    expect(unexplained.map((m) => [m.check, m.skuId, m.difference])).toEqual([["leaf_history", id, 17]]);

    // As a database written before migration 4 would be (one copy stored): the next sync --full adds the missing copy (README).
    const full = await sync(["--full"], copy);
    expect(full.run.history_rows_added).toBe(1);
    expect(diffAgainstTruth(copy, sim.groundTruth())).toEqual([]);
    expect((await runCli(["reconcile"], { env: { INVENTORY_DB: copy } })).code).toBe(0);
  });
});
