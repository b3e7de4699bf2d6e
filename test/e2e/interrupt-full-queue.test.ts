/**
 * A signal that arrives once the list walk has ended but while the walker is still
 * handing SKUs to the workers (more SKUs than the run's 2,000-id work queue holds).
 * Two regressions: the walker, blocked on the full queue, kept the run from ending
 * (the process exited 0 with the run left 'running'), and the walk's end (misses and
 * deletions) was not committed with the last page, so a resumed run, which skips the
 * list walk, never marked the SKUs the server had dropped as deleted.
 */
import { afterEach, beforeAll, afterAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { DEFAULTS } from "../../src/core/defaults.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { consistencyProblems, lastRun, startFullSync, walkState, withDb } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_intq_0a1b2c3d4e5f60718293a4b5";
/** The run's work queue (QUEUE_CAPACITY in src/sync/sync.ts). */
const QUEUE_CAPACITY = 2_000;
let sim: RunningSimulator;
let dir: string;
const spawned: ChildProcess[] = [];

beforeAll(async () => {
  sim = await startSimulator({ seed: 77, skus: 2_200, historyDepth: 2, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-intq-"));
});
afterEach(() => {
  // Only a child this test spawned, by its own handle, if a failure left it running.
  for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("SIGTERM with the work queue full", () => {
  it("after the list walk ended (2,200 SKUs): exits 143 within 5 s, recorded interrupted with the walk's deletions applied, consistent, and the next sync resumes the same walk to ground truth", async () => {
    const db = join(dir, "sigterm.db");
    // An earlier walk stores SKU `removed` (an incremental run stopped by a small request budget) ...
    const earlier = await runCli(["sync", "--max-requests", "100", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(earlier.code, earlier.stderr).toBe(0);
    const removed = sim.groundTruth().skus[0]!;
    expect(withDb(db, (d) => d.prepare("SELECT deleted_at FROM skus WHERE id = ?").get(removed.item.id))).toEqual({ deleted_at: null });
    // ... then the server drops it, so the full walk below must mark it deleted.
    sim.model.removeSku(removed.item.id as string);
    const truth = sim.groundTruth();

    // SKUs slow, list pages not: the walk ends while most SKUs are still queued.
    sim.setFaults([{ kind: "slow", delayMs: 15, endpoint: ["detail", "history"] }]);
    const p = startFullSync(db, sim.baseUrl, KEY);
    spawned.push(p.child);
    const listDone = () => withDb(db, (d) => d.prepare("SELECT list_done FROM sync_runs WHERE mode = 'full' ORDER BY id DESC LIMIT 1").get() as { list_done: number } | undefined)?.list_done === 1;
    while (!listDone()) {
      expect(p.child.exitCode, p.out()).toBeNull();
      await new Promise((r) => setTimeout(r, 20));
    }
    const sentAt = Date.now();
    p.child.kill("SIGTERM");
    const end = await p.closed;
    expect(end.at - sentAt).toBeLessThan(5_000);
    // 128 + 15: a one-shot sync stopped by SIGTERM.
    expect(end.code, p.out()).toBe(143);
    expect(p.out()).toMatch(/sync: interrupted: interrupted before the run finished/);

    const run = lastRun(db);
    expect(run).toMatchObject({ mode: "full", status: "interrupted", list_done: 1, skus_deleted: 1 });
    expect(withDb(db, (d) => d.prepare("SELECT count(*) AS n FROM sync_journal WHERE kind = 'interrupted' AND run_id = ?").get(run.id))).toEqual({ n: 1 });
    expect(withDb(db, (d) => d.prepare("SELECT deleted_at IS NOT NULL AS deleted FROM skus WHERE id = ?").get(removed.item.id))).toEqual({ deleted: 1 });
    expect(consistencyProblems(db, truth, [removed])).toEqual([]);
    const before = walkState(db, truth);
    expect(before.resumableWalk).toBe(run.walk_id);
    // More left than the queue and the workers hold: the walker had not handed out every SKU.
    expect(before.remaining).toBeGreaterThan(QUEUE_CAPACITY + DEFAULTS.concurrency);

    sim.setFaults([]);
    sim.resetStats();
    const next = startFullSync(db, sim.baseUrl, KEY);
    spawned.push(next.child);
    const end2 = await next.closed;
    expect(end2.code, next.out()).toBe(0);
    expect(lastRun(db)).toMatchObject({ status: "succeeded", walk_id: run.walk_id });
    // It resumed: no list page again but page one's totals (one request of one item), and only the SKUs the walk had not stored.
    expect(sim.stats().byEndpoint.list).toBe(1);
    expect(sim.stats().byEndpoint.detail).toBe(before.remaining);
    expect(diffAgainstTruth(db, truth)).toEqual([]);
    // Its snapshot holds the list's totals, as every run's does (it walked no page: they came from page one).
    const resumed = lastRun(db);
    const overall = withDb(db, (d) => d.prepare("SELECT sku_count FROM inventory_snapshots WHERE run_id = ? AND root_id IS NULL").get(resumed.id));
    expect(overall).toEqual({ sku_count: truth.skus.length });
  });
});
