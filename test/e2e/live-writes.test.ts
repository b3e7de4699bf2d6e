/**
 * Writes that land while the mirror walks (docs/server-variance.md, cursor position). The API
 * document does not say what a cursor holds: a server may page by keyset (the simulator's
 * default) or by offset, and with offsets a new history row landing between two pages of a walk
 * makes the next page begin with the rows the page before ended with. Stored as they come,
 * those would be identical copies the server does not have, and history is a multiset.
 *
 * The list the same way: a SKU removed ahead of an offset walk's position makes the next page skip
 * one SKU, which the end of the walk would mark deleted; its detail still answers, so it is not.
 *
 * The real CLI against the real simulator, pages of 8: new movements landing right after the first
 * page of several SKUs' history walks, then a SKU removed between two list pages of a second full
 * sync. No row the server does not have is stored, no SKU it has is marked deleted, and a full sync
 * once the projections settled ends equal to ground truth row by row.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { waitFor } from "../helpers/wait-for.js";
import { diffAgainstTruth, historyNotInTruth } from "../helpers/ground-truth.js";
import { lastRun, withDb } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_live_writes_1f2e3d4c5b6a79880716";

/** Run the CLI and kill it (SIGKILL) once the server has been asked for the `n`th list page (one the test's fault holds). */
async function killAtListRequest(sim: RunningSimulator, args: string[], env: Record<string, string>, n: number): Promise<void> {
  const child = spawnCli(args, { env });
  child.stdout!.resume();
  child.stderr!.resume();
  const exited = new Promise((r) => child.on("exit", r));
  await waitFor(
    () => sim.stats().byEndpoint.list === n || null,
    () => `list page ${n} was not asked (${sim.stats().byEndpoint.list} list requests)`,
  );
  child.kill("SIGKILL");
  await exited;
}
const HISTORY_WRITES = 6;

describe.each(["offset", "keyset"] as const)("history rows written mid-walk, cursors by %s", (cursorPosition) => {
  let sim: RunningSimulator;
  let dir: string;
  let db: string;

  beforeAll(async () => {
    sim = await startSimulator({
      seed: 23,
      skus: 30,
      historyDepth: 30,
      apiKey: KEY,
      variance: { cursorPosition, maxPageSize: 8 },
      liveWrites: { history: HISTORY_WRITES },
    });
    dir = mkdtempSync(join(tmpdir(), "im-live-"));
    db = join(dir, "live.db");
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function sync(args: string[]) {
    const r = await runCli(["sync", "--no-progress", ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(lastRun(db).status).toBe("succeeded");
  }

  it("sync --full, with a new row landing after the first history page of 6 SKUs, stores no row the server does not have", async () => {
    await sync(["--full"]);
    expect(sim.liveWritesMade().filter((w) => w.kind === "history-row")).toHaveLength(HISTORY_WRITES);
    expect(historyNotInTruth(db, sim.groundTruth())).toEqual([]);
  });

  /** SKUs the mirror marked deleted that the server still has. */
  const deletedButThere = () => {
    const there = new Set(sim.groundTruth().skus.map((t) => t.item.id));
    return withDb(db, (d) => (d.prepare("SELECT id FROM skus WHERE deleted_at IS NOT NULL").all() as Array<{ id: string }>).map((r) => r.id)).filter((id) => there.has(id));
  };

  it("a second sync --full, with a SKU removed between two list pages, marks no SKU deleted that the server has", async () => {
    sim.setLiveWrites({ listRemovals: 1 });
    await sync(["--full"]);
    expect(sim.liveWritesMade().filter((w) => w.kind === "list-removal")).toHaveLength(1);
    expect(deletedButThere()).toEqual([]);
    // By offset, the page after the removal skipped one SKU: asked for, it answered, and it was spared.
    const spared = withDb(db, (d) => d.prepare("SELECT sku_id FROM sync_journal WHERE run_id = ? AND kind = 'info' AND message LIKE 'not listed in this walk%'").all(lastRun(db).id));
    expect(spared).toHaveLength(cursorPosition === "offset" ? 1 : 0);
    expect(historyNotInTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("once the projections caught up, an incremental sync invents nothing, and a full sync ends equal to ground truth", async () => {
    // A row landing on a leaf whose projection lags is not in the quantities yet, and a re-poll walks
    // history only when they change (issue 10 §3): the row is fetched once the projection replays it.
    sim.model.settle();
    await sync([]);
    expect(historyNotInTruth(db, sim.groundTruth())).toEqual([]);
    expect(deletedButThere()).toEqual([]);
    // The SKU removed mid-walk was listed before it went: the next walk misses it and its detail's 404 confirms it.
    await sync(["--full"]);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});

describe("a SKU removed while its own history is walked", () => {
  let sim: RunningSimulator;
  let dir: string;
  let db: string;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 29, skus: 20, historyDepth: 30, apiKey: KEY, variance: { maxPageSize: 8 } });
    dir = mkdtempSync(join(tmpdir(), "im-live-gone-"));
    db = join(dir, "gone.db");
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("its history's 404, confirmed by its detail's, marks it deleted: the run succeeds and ends equal to ground truth", async () => {
    sim.setLiveWrites({ historyRemovals: 1 });
    const r = await runCli(["sync", "--full", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const [gone] = sim.liveWritesMade();
    expect(gone?.kind).toBe("history-removal");
    const journal = withDb(db, (d) => d.prepare("SELECT kind, endpoint, sku_id FROM sync_journal WHERE kind IN ('sku_vanished', 'sku_failed')").all());
    expect(journal).toEqual([{ kind: "sku_vanished", endpoint: "history", sku_id: gone!.skuId }]);
    expect(withDb(db, (d) => d.prepare("SELECT deleted_at IS NOT NULL AS deleted FROM skus WHERE id = ?").get(gone!.skuId))).toEqual({ deleted: 1 });
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    // The run's counts say so, in its summary and in sync_runs (`status`): before, '19 fetched, 0 failed, 0 marked deleted', one SKU in none.
    expect(r.stdout).toContain("20 listed, 19 fetched, 0 failed, 1 marked deleted");
    expect(lastRun(db)).toMatchObject({ skus_deleted: 1 });
  });
});

describe.each(["offset", "keyset"] as const)("a SKU created between two list pages of a fresh database's first sync --full, cursors by %s", (cursorPosition) => {
  let sim: RunningSimulator;
  let dir: string;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 31, skus: 30, historyDepth: 12, apiKey: KEY, variance: { cursorPosition, maxPageSize: 8 }, liveWrites: { listCreations: 1 } });
    dir = mkdtempSync(join(tmpdir(), "im-live-created-"));
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("walks the list again when its count moved, and ends equal to ground truth with the new SKU in it", async () => {
    const db = join(dir, "created.db");
    const r = await runCli(["sync", "--full", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const made = sim.liveWritesMade();
    expect(made.map((w) => w.kind)).toEqual(["list-creation"]);
    expect(sim.groundTruth().skus).toHaveLength(31);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const again = withDb(db, (d) => d.prepare("SELECT count(*) AS n FROM sync_journal WHERE run_id = ? AND message LIKE 'the list changed under its walk%'").get(lastRun(db).id));
    expect(again).toEqual({ n: 1 });
  });
});

describe.each(["keyset", "offset"] as const)("a SKU listed again in one walk, its stock gone since its detail was fetched (list ordered by quantity), cursors by %s", (cursorPosition) => {
  let sim: RunningSimulator;
  let dir: string;

  beforeAll(async () => {
    // The SKU whose detail was served last loses its stock after a list page: ordered by quantity, it moves behind
    // the walk's position and is listed again, changed (a server whose list order follows its data).
    const variance = { listOrder: "quantity", cursorPosition, maxPageSize: 5 } as const;
    sim = await startSimulator({ seed: 37, skus: 40, historyDepth: 12, apiKey: KEY, variance, liveWrites: { listJumps: 1 } });
    dir = mkdtempSync(join(tmpdir(), "im-live-jump-"));
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the sync --full that lists it twice ends equal to ground truth (fetched again in that run when a worker held it), and so does an incremental sync after it", async () => {
    const db = join(dir, "jump.db");
    const env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
    const full = await runCli(["sync", "--full", "--no-progress"], { env });
    expect(full.code, full.stdout + full.stderr).toBe(0);
    expect(sim.liveWritesMade().map((w) => w.kind)).toEqual(["list-jump"]);
    // The premise: the walk listed that SKU twice (40 SKUs, 41 listings).
    expect(lastRun(db).skus_listed).toBe(41);
    // Before: the second listing's fingerprint was kept, the next run planned nothing for the SKU, and its leaves
    // kept the quantities of the detail fetched before the write until it was re-verified. Then: fetched again by the
    // next run when a worker held it at its second listing (the SKU jumped is the one whose detail was served last).
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const incremental = await runCli(["sync", "--no-progress"], { env });
    expect(incremental.code, incremental.stdout + incremental.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});

describe.each([
  { cursorPosition: "offset", summaryOnce: false },
  { cursorPosition: "keyset", summaryOnce: false },
  { cursorPosition: "offset", summaryOnce: true },
] as const)(
  "a SKU removed between two list pages of a fresh database's first sync --full, cursors by $cursorPosition, summary on the first page only: $summaryOnce",
  ({ cursorPosition, summaryOnce }) => {
    let sim: RunningSimulator;
    let dir: string;
    let db: string;

    beforeAll(async () => {
      sim = await startSimulator({ seed: 31, skus: 30, historyDepth: 12, apiKey: KEY, variance: { cursorPosition, summaryOnce, maxPageSize: 8 }, liveWrites: { listRemovals: 1 } });
      dir = mkdtempSync(join(tmpdir(), "im-live-fresh-"));
      db = join(dir, "fresh.db");
    });
    afterAll(async () => {
      await sim?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("walks the list again when its count changed under the walk, and ends equal to ground truth with no SKU skipped", async () => {
      const r = await runCli(["sync", "--full", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(sim.liveWritesMade().map((w) => w.kind)).toEqual(["list-removal"]);
      expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
      // By offset the page after the removal skipped one SKU, which only the second walk lists.
      const again = withDb(db, (d) =>
        d.prepare("SELECT message FROM sync_journal WHERE run_id = ? AND endpoint = 'list' AND message LIKE 'the list changed under its walk%'").all(lastRun(db).id),
      ) as Array<{ message: string }>;
      expect(again).toHaveLength(1);
      expect(again[0]!.message).toContain(cursorPosition === "offset" ? "1 SKU it had not listed" : "0 SKUs it had not listed");
    });

    it("a rerun under which nothing changed walks the list once: one request per page, and no walk again", async () => {
      sim.resetStats();
      const r = await runCli(["sync", "--full", "--no-progress"], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(sim.stats().byEndpoint.list).toBe(Math.ceil(sim.groundTruth().skus.length / 8));
      const again = withDb(db, (d) => d.prepare("SELECT count(*) AS n FROM sync_journal WHERE run_id = ? AND message LIKE 'the list changed under its walk%'").get(lastRun(db).id));
      expect(again).toEqual({ n: 0 });
      expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    });
  },
);

describe("a run killed during the list's walk again, in a fresh database (cursors by offset)", () => {
  let sim: RunningSimulator;
  let dir: string;
  let db: string;

  beforeAll(async () => {
    // The first walk is 4 pages of 8 (a SKU removed after its first page, and one skipped by the offset):
    // the 5th list request is the walk again's first page, held for a minute while the test kills the run.
    sim = await startSimulator({
      seed: 31,
      skus: 30,
      historyDepth: 12,
      apiKey: KEY,
      variance: { cursorPosition: "offset", maxPageSize: 8 },
      liveWrites: { listRemovals: 1 },
      faults: [{ kind: "slow", endpoint: "list", after: 4, count: 1, delayMs: 60_000 }],
    });
    dir = mkdtempSync(join(tmpdir(), "im-live-again-"));
    db = join(dir, "again.db");
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the resumed run walks the list again and ends equal to ground truth with the skipped SKU", async () => {
    const env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
    await killAtListRequest(sim, ["sync", "--full", "--no-progress"], env, 5);
    expect(sim.liveWritesMade().map((w) => w.kind)).toEqual(["list-removal"]);
    const r = await runCli(["sync", "--full", "--no-progress"], { env });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    const again = withDb(db, (d) => d.prepare("SELECT message FROM sync_journal WHERE run_id = ? AND message LIKE 'the list changed under its walk%'").all(lastRun(db).id)) as Array<{
      message: string;
    }>;
    expect(again.map((a) => a.message.replace(/.*walked it again and /, ""))).toEqual(["found 1 SKU it had not listed"]);
  });
});

describe("an incremental run killed during the list's walk again (cursors by offset)", () => {
  let sim: RunningSimulator;
  let dir: string;
  let db: string;

  beforeAll(async () => {
    sim = await startSimulator({ seed: 31, skus: 30, historyDepth: 12, apiKey: KEY, variance: { cursorPosition: "offset", maxPageSize: 8 } });
    dir = mkdtempSync(join(tmpdir(), "im-live-again-incr-"));
    db = join(dir, "again.db");
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the resumed run walks the list again and queues the re-verification the killed run had not, then ends equal to ground truth", async () => {
    const env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
    const full = await runCli(["sync", "--full", "--no-progress"], { env });
    expect(full.code, full.stdout + full.stderr).toBe(0);
    // The incremental walk is 4 pages of 8 (a SKU removed after its 2nd page): the 5th list request is the walk again's first page, held while the test kills the run.
    sim.resetStats();
    sim.setLiveWrites({ listRemovals: 1 });
    sim.setFaults([{ kind: "slow", endpoint: "list", after: 4, count: 1, delayMs: 60_000 }]);
    await killAtListRequest(sim, ["sync", "--no-progress"], env, 5);
    expect(sim.liveWritesMade().map((w) => w.kind)).toEqual(["list-removal"]);
    sim.setFaults([]);
    const r = await runCli(["sync", "--no-progress"], { env });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const run = lastRun(db);
    expect(run).toMatchObject({ mode: "incremental" });
    expect(run.resumed_from).not.toBeNull();
    const again = withDb(db, (d) => d.prepare("SELECT message FROM sync_journal WHERE run_id = ? AND message LIKE 'the list changed under its walk%'").all(run.id)) as Array<{ message: string }>;
    expect(again).toHaveLength(1);
    expect(again[0]!.message).toContain("which stopped before walking it again");
    // Before: the resumed run skipped the re-verification, '0 re-verified'.
    expect(Number(run.skus_reverified)).toBeGreaterThan(0);
    expect(r.stdout).toMatch(/[1-9]\d* re-verified/);
    // The SKU removed after the killed run listed it is missed by the next walk, which asks for it and marks it deleted.
    const next = await runCli(["sync", "--no-progress"], { env });
    expect(next.code, next.stdout + next.stderr).toBe(0);
    expect(next.stdout).toContain("1 marked deleted");
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});
