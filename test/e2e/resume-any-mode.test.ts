/**
 * A plain `sync` after an interrupted `sync --full` (issue 11, B7): it resumes the unfinished
 * backfill instead of starting a new walk and fetching the SKUs already done again. The real
 * CLI against the simulator; the interruption is SIGINT once part of the SKUs are stored.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { queryWhileWriting, storedSkus } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_resume_mode_6f5e4d3c2b1a0f9e8d7c";
const SKUS = 300;
let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 81, skus: SKUS, historyDepth: 5, apiKey: KEY, quota: { requestsPerSecond: 400 } });
  dir = mkdtempSync(join(tmpdir(), "im-resume-mode-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

const q = queryWhileWriting;
const fetched = storedSkus;

describe("a plain sync after an interrupted sync --full", () => {
  it("resumes the backfill: only the SKUs not yet stored are fetched, the run is recorded as the full that finished it, the mirror equals ground truth", async () => {
    const db = join(dir, "m.db");
    const env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
    const child = spawnCli(["sync", "--full", "--no-progress"], { env });
    child.stdout!.resume();
    child.stderr!.resume();
    const exited = new Promise<number | null>((r) => child.on("exit", (c) => r(c)));
    const end = Date.now() + 60_000;
    while (fetched(db) < 100) {
      if (Date.now() > end) throw new Error("100 SKUs were not stored");
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGINT");
    await exited;
    expect(q<{ status: string }>(db, "SELECT status FROM sync_runs")).toEqual([{ status: "interrupted" }]);
    const done = fetched(db);
    expect(done).toBeLessThan(SKUS);

    sim.resetStats();
    const r = await runCli(["sync", "--no-progress"], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/resumed from run 1/);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    // Only what was left: the SKUs stored before the interruption were not fetched again.
    expect(sim.stats().byEndpoint.detail).toBeLessThanOrEqual(SKUS - done);
    const runs = q<{ mode: string; status: string }>(db, "SELECT mode, status FROM sync_runs ORDER BY id");
    expect(runs).toEqual([
      { mode: "full", status: "interrupted" },
      { mode: "full", status: "succeeded" },
    ]);
    const status = await runCli(["status", "--json"], { env });
    expect(JSON.parse(status.stdout).lastFullSuccess).toMatchObject({ id: 2 });
  });
});
