/**
 * The mirror against other servers the API document equally allows: for each named server
 * profile (src/simulator/profiles.ts; docs/server-variance.md says which open point each
 * varies), the real CLI against the real simulator serving that profile:
 *
 *   1. crash-resume: `sync --full` on an empty database is killed with SIGKILL (by pid) once
 *      the simulator has served it SKUs (mid-walk), or, for the profiles in KILL_AFTER_LIST, once
 *      its list walk has ended; the file is consistent with no half SKU;
 *   2. the next `sync --full` resumes that walk, fetches only what is left, and ends equal
 *      to ground truth row by row;
 *   3. a rerun adds 0 history rows and leaves every table's row count as it was;
 *   4. churn the list can show, then an incremental `sync`, ends equal to the new ground truth
 *      (what the list cannot show is re-verification's job: incremental.test.ts);
 *   5. nothing changed since: the next incremental `sync` re-polls each SKU that is not clean with
 *      its detail alone (its stored history still adds up, float noise and all: issue 10 §3) and
 *      walks no history for a mismatch; `reconcile` finds no unexplained mismatch.
 *
 * More profiles join by name: add them to PROFILES (history and quota profiles too).
 * Run others with SERVER_PROFILES=name,name (e.g. the single-option ones in VARIANCE_PROFILES).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { startSimulator, type FaultRule, type RunningSimulator } from "../../src/simulator/index.js";
import { profileOptions, SERVER_PROFILES, VARIANCE_E2E_PROFILES } from "../../src/simulator/profiles.js";
import { DEFAULTS } from "../../src/core/defaults.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth, tableCounts } from "../helpers/ground-truth.js";
import { consistencyProblems, lastRun, queryWhileWriting, startFullSync, walkState, withDb } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_variance_5e4d3c2b1a09f8e7d6c5";
const SKUS = 100;
/** Small enough to stay cheap, deep enough that most SKUs have more than one history page at short page sizes. */
const HISTORY_DEPTH = 10;
/** Every response is held this long during the crash run, so the kill lands mid-walk. */
const SLOW = { kind: "slow", delayMs: 10 } as const;
/** The crash run is killed once the simulator has served this many detail requests... */
const KILL_AFTER_DETAILS = 30;
/**
 * ...or, for these profiles, once its list walk has ended (list_done committed with the last page), while
 * SKUs are still being fetched: the resumed run then walks no list page. Both kill points are deterministic
 * per profile (a mid-walk kill may land after the walk's end on a loaded machine: CI once did, and the
 * resumed run stored no snapshot). KILL_POINT=list-done or =details runs every profile at one of them.
 */
const KILL_AFTER_LIST: readonly string[] = ["list-by-quantity", "paging-variance", "data-variance", "history-identical-rows"];
/** During a crash run killed after the list walk: SKUs slow (list pages not), so the kill lands with most SKUs still to fetch. */
const SLOW_SKUS: FaultRule = { kind: "slow", delayMs: 30, endpoint: ["detail", "history"] };

function killAfterList(profile: string): boolean {
  if (process.env.KILL_POINT) return process.env.KILL_POINT === "list-done";
  return KILL_AFTER_LIST.includes(profile);
}

/** The newest run has committed its list walk's last page. */
function listDone(db: string): boolean {
  return queryWhileWriting<{ list_done: number }>(db, "SELECT list_done FROM sync_runs ORDER BY id DESC LIMIT 1")[0]?.list_done === 1;
}
/**
 * The sync asks for 100 per page; every server here serves at most this many (unless its profile
 * caps pages itself), so every walk spans pages and cursors: checkpoints, resumes and cursor
 * shapes are exercised with every profile, not only with the short-pages ones.
 */
const PAGE_CAP = 12;
/** During the incremental run: one list cursor and one history cursor rejected (400 invalid_cursor, or what the profile's errors say). */
const REJECT_CURSORS = [
  { kind: "reject-cursor", endpoint: "list", count: 1 },
  { kind: "reject-cursor", endpoint: "history", count: 1 },
] as const;
/** Every Nth SKU (by id) gets one of the list-visible mutations. */
const CHURN_EVERY = 6;

/** The profiles this file runs: the variance bundles, plus whatever other helpers add here by name. */
const PROFILES: readonly string[] = process.env.SERVER_PROFILES ? process.env.SERVER_PROFILES.split(",") : [...VARIANCE_E2E_PROFILES];

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-variance-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Stop a child we spawned if a test failed before it ended (its own pid only). */
const spawned: ChildProcess[] = [];
afterEach(() => {
  for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

async function sync(sim: RunningSimulator, db: string, args: string[]) {
  const t0 = Date.now();
  const r = await runCli(["sync", "--no-progress", ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
  if (process.env.VARIANCE_TIMING) console.log(`sync ${args.join(" ")}: ${Date.now() - t0} ms`);
  return { ...r, out: r.stdout + r.stderr, run: lastRun(db) };
}

/** The overall row of a run's snapshot (`inventory_snapshots`, root_id NULL): its SKU count, or null when the run stored none. */
function snapshotSkuCount(db: string, runId: number): number | null {
  const row = withDb(db, (d) => d.prepare("SELECT sku_count FROM inventory_snapshots WHERE run_id = ? AND root_id IS NULL").get(runId)) as { sku_count: number | null } | undefined;
  return row ? row.sku_count : null;
}

/** Wait for a state, not a time: poll `ready` until it holds or the child ends. */
async function until(ready: () => boolean, child: ChildProcess): Promise<void> {
  while (!ready() && child.exitCode === null && child.signalCode === null) await new Promise((r) => setTimeout(r, 5));
}

/**
 * Mutations the list shows (a quantity, a freshness to re-poll, a name, a SKU added or gone),
 * spread over every CHURN_EVERY-th SKU: movements in and out, a SET to another count, a late
 * row older than the incremental overlap, a settle, a rename, and new SKUs. (A removed SKU is
 * marked deleted after two missed incremental walks: incremental.test.ts covers that.)
 * Returns how many SKUs changed.
 */
function visibleChurn(sim: RunningSimulator): number {
  const m = sim.model;
  const truth = m.groundTruth();
  const leaves = m.activeLeafIds();
  let changed = 0;
  truth.skus.forEach((t, i) => {
    if (i % CHURN_EVERY !== 0) return;
    const id = t.item.id;
    const clean = (t.detail.locations ?? []).filter((l) => l.freshness?.status === "clean");
    const stocked = clean.find((l) => l.quantity > 2);
    const op = (i / CHURN_EVERY) % 7;
    if (op === 0) m.movement(id, leaves.find((l) => !(t.detail.locations ?? []).some((d) => d.id === l)) ?? leaves[0]!, 5);
    else if (op === 1 && stocked) m.set(id, stocked.id, stocked.quantity + 3);
    else if (op === 2 && stocked) m.lateRow(id, stocked.id, 2, 5 * 86_400_000);
    else if (op === 3 && stocked) m.movement(id, stocked.id, -1);
    else if (op === 4) m.renameSku(id, `${t.item.name} (renamed)`);
    else if (op === 5 && m.settle(id) === 0) m.movement(id, leaves[1]!, 4);
    else if (op === 6) m.movement(m.addSku({ name: `Variance newcomer ${i}` }), leaves[3]!, 2);
    else m.movement(id, leaves[2]!, 7);
    changed++;
  });
  for (let n = 0; n < 2; n++) m.movement(m.addSku({ name: `Variance newcomer ${n}` }), leaves[n]!, 9);
  return changed + 2;
}

describe("server variance: the mirror against each server profile", () => {
  it("every profile named here exists", () => {
    for (const name of PROFILES) expect(SERVER_PROFILES, name).toHaveProperty(name);
  });

  for (const name of PROFILES) {
    it(`${name} (${SERVER_PROFILES[name]?.about ?? "?"}): kill -9 mid full sync + resume, rerun adds 0 rows, churn + incremental: each equal to ground truth`, async () => {
      const profile = profileOptions([name]);
      const cap = profile.variance?.maxPageSize ?? PAGE_CAP;
      const sim = await startSimulator({
        seed: 11,
        skus: SKUS,
        historyDepth: HISTORY_DEPTH,
        apiKey: KEY,
        ...profile,
        variance: { ...profile.variance, maxPageSize: cap },
      });
      // The list walk's checkpoints land every `pageSize` SKUs.
      const pageSize = Math.min(DEFAULTS.listPageSize, cap);
      try {
        const truth = sim.groundTruth();
        const db = join(dir, `${name}.db`);
        // 1. A full sync killed with SIGKILL once it has fetched SKUs, mid-walk or once its walk has listed every SKU.
        const afterList = killAfterList(name);
        sim.setFaults(afterList ? [SLOW_SKUS] : [SLOW]);
        const p = startFullSync(db, sim.baseUrl, KEY);
        spawned.push(p.child);
        if (afterList) await until(() => listDone(db), p.child);
        else await until(() => sim.stats().byEndpoint.detail >= KILL_AFTER_DETAILS, p.child);
        p.child.kill("SIGKILL");
        const end = await p.closed;
        expect(end.signal, `the run ended before it was killed: ${p.out()}`).toBe("SIGKILL");
        const list = { order: sim.listOrder(), pageSize };
        expect(consistencyProblems(db, truth, [], list)).toEqual([]);
        const before = walkState(db, truth);
        expect(before.resumableWalk).not.toBeNull();

        // 2. The next full sync resumes the walk, fetches only what is left, and ends equal to ground truth.
        sim.setFaults([]);
        sim.resetStats();
        const resumed = await sync(sim, db, ["--full"]);
        expect(resumed.code, resumed.out).toBe(0);
        expect(resumed.run).toMatchObject({ status: "succeeded", walk_id: before.resumableWalk });
        expect(sim.stats().byEndpoint.detail).toBe(before.remaining);
        expect(consistencyProblems(db, truth, [], list)).toEqual([]);
        expect(diffAgainstTruth(db, truth)).toEqual([]);
        // ...and stored the list's totals as its snapshot, whichever page it resumed at (a server may send them on page one only).
        expect(snapshotSkuCount(db, resumed.run.id as number)).toBe(truth.skus.length);

        // 3. A rerun adds nothing.
        const counts = tableCounts(db);
        const rerun = await sync(sim, db, ["--full"]);
        expect(rerun.code, rerun.out).toBe(0);
        expect(rerun.run).toMatchObject({ status: "succeeded", history_rows_added: 0 });
        expect(tableCounts(db)).toEqual(counts);
        expect(diffAgainstTruth(db, truth)).toEqual([]);

        // 4. Churn the list shows, then an incremental sync.
        expect(visibleChurn(sim)).toBeGreaterThan(10);
        sim.setFaults([...REJECT_CURSORS]);
        sim.resetStats();
        const incr = await sync(sim, db, []);
        // The list walk always sends a cursor (it spans pages); a history walk only when it goes past one page.
        expect(sim.stats().faultsFired["reject-cursor"], "a cursor rejection was served").toBeGreaterThanOrEqual(1);
        expect(incr.code, incr.out).toBe(0);
        expect(incr.run).toMatchObject({ mode: "incremental", status: "succeeded" });
        sim.setFaults([]);
        expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);

        // 5. Nothing changed: re-polls cost their detail only, no history walk for a mismatch; the mirror agrees with itself.
        const quiet = await sync(sim, db, ["--json"]);
        expect(quiet.code, quiet.out).toBe(0);
        const result = JSON.parse(quiet.stdout.trim().split("\n").at(-1)!);
        expect(result).toMatchObject({ status: "succeeded", historyDeepWalks: 0, historyRowsAdded: 0 });
        expect(result.plan.repolled, "SKUs not clean to re-poll").toBeGreaterThan(0);
        expect(result.repolledDetailOnly).toBe(result.plan.repolled);
        const rec = await runCli(["reconcile", "--json"], { env: { INVENTORY_DB: db } });
        expect(rec.code, rec.stdout + rec.stderr).toBe(0);
        expect(JSON.parse(rec.stdout)).toMatchObject({ ok: true, unexplained: 0 });
      } finally {
        await sim.close();
      }
    });
  }
});
