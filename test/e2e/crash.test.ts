/**
 * Crash safety and resume, with real processes: the CLI is killed with SIGKILL at
 * random moments of a full sync (seeded, so a failure replays), two processes are
 * started on one database file, and SIGINT/SIGTERM stop a run. After each: the file
 * passes PRAGMA integrity_check, holds no half-written unit of work, and the next run
 * resumes the walk without refetching what was committed and ends equal to ground truth.
 *
 * Replay a kill sequence with CRASH_SEED=<n> (the seed is in every failure message).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChildProcess } from "node:child_process";
import { startSimulator, type GroundTruth, type RunningSimulator } from "../../src/simulator/index.js";
import { DEFAULTS } from "../../src/core/defaults.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { committedSince, consistencyProblems, lastRun, startFullSync, walkState as walkStateOf, withDb } from "../helpers/mirror-state.js";
import { mulberry32 } from "../../src/simulator/prng.js";

const KEY = "sim_e2e_crash_8c7b6a5f4e3d2c1b0a998877";
const SKUS = 300;
/** Every response is held this long, so a run lasts a few seconds and a kill lands mid-walk. */
const SLOW = { kind: "slow", delayMs: 15 } as const;
const KILLS = 20;
const SEED = Number(process.env.CRASH_SEED ?? 20_260_611);
/**
 * Kill points: a few during startup (lock, migrations, the workspace check: up to 500 ms after
 * spawn), the rest up to 0.6 s after the simulator saw the child's first request (locations,
 * list pages, SKUs, and sometimes the end of the walk).
 */
const STARTUP_SHARE = 0.15;
const STARTUP_MS: [number, number] = [50, 500];
const AFTER_FIRST_REQUEST_MS: [number, number] = [0, 600];

let sim: RunningSimulator;
let truth: GroundTruth;
let dir: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 31, skus: SKUS, historyDepth: 20, apiKey: KEY });
  truth = sim.groundTruth();
  dir = mkdtempSync(join(tmpdir(), "im-crash-"));
});
afterEach(() => sim.setFaults([]));
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Stop a child we spawned if a test failed before it ended (its own pid only). */
const spawned: ChildProcess[] = [];
afterEach(() => {
  for (const c of spawned.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

const detailRequests = () => sim.stats().byEndpoint.detail;
const start = (db: string, baseUrl = sim.baseUrl) => startFullSync(db, baseUrl, KEY);
const walkState = (db: string) => walkStateOf(db, truth);
const problems = (db: string) => consistencyProblems(db, truth);

describe("kill -9 at random points", () => {
  it(`${KILLS} SIGKILLs in a row: each leaves the file consistent with no half SKU, each resumed run refetches nothing committed, and the end state equals ground truth`, async () => {
    const db = join(dir, "killed.db");
    const random = mulberry32(SEED);
    const concurrency = DEFAULTS.concurrency;
    const log: string[] = [];
    const ctx = (i: number) => `CRASH_SEED=${SEED}, kill ${i + 1}: ${log.join(" | ")}`;
    let resumedRuns = 0;
    sim.setFaults([SLOW]);

    for (let i = 0; i < KILLS; i++) {
      const before = walkState(db);
      sim.resetStats();
      const duringStartup = random() < STARTUP_SHARE;
      const [lo, hi] = duringStartup ? STARTUP_MS : AFTER_FIRST_REQUEST_MS;
      const delay = Math.round(lo + random() * (hi - lo));
      const p = start(db);
      spawned.push(p.child);
      let timer: NodeJS.Timeout | undefined;
      const kill = () => (timer = setTimeout(() => p.child.kill("SIGKILL"), delay));
      let exited = false;
      void p.closed.then(() => (exited = true));
      if (duringStartup) kill();
      else {
        while (sim.stats().requests === 0 && !exited) await new Promise((r) => setTimeout(r, 5));
        kill();
      }
      const end = await p.closed;
      clearTimeout(timer);
      const detail = detailRequests();
      const committedIds = committedSince(db, before);
      const committed = committedIds.length;
      log.push(`${duringStartup ? "" : "first request + "}${delay} ms: ${end.signal ?? `exit ${end.code}`}, ${detail} detail, ${committed} committed`);

      expect(problems(db), ctx(i)).toEqual([]);
      // No SKU the walk had already committed was fetched and stored again.
      if (before.resumableWalk !== null) {
        expect(
          committedIds.filter((id) => before.fetchedWalk.get(id) === before.resumableWalk),
          ctx(i),
        ).toEqual([]);
      }
      if (end.signal === null) {
        // The run finished before its kill point: a whole (rest of a) walk, nothing refetched.
        expect(end.code, ctx(i) + p.out()).toBe(0);
        expect(detail, ctx(i)).toBe(before.remaining);
      } else {
        expect(end.signal, ctx(i)).toBe("SIGKILL");
        // Only SKUs still to do were requested; every worker holds at most one uncommitted SKU.
        expect(detail, ctx(i)).toBeLessThanOrEqual(before.remaining);
        expect(detail, ctx(i)).toBeGreaterThanOrEqual(committed);
        expect(detail - committed, ctx(i)).toBeLessThanOrEqual(concurrency);
      }
      const after = walkState(db);
      if (after.runs > before.runs && before.resumableWalk !== null) {
        // The run got as far as recording itself: it continued the unfinished walk.
        expect(lastRun(db).walk_id, ctx(i)).toBe(before.resumableWalk);
        resumedRuns++;
      }
    }

    // The final run, undisturbed (and at full speed): it resumes, requests exactly what is left, and ends equal to ground truth.
    sim.setFaults([]);
    const before = walkState(db);
    sim.resetStats();
    const p = start(db);
    spawned.push(p.child);
    const end = await p.closed;
    expect(end.code, ctx(KILLS) + p.out()).toBe(0);
    expect(lastRun(db).status).toBe("succeeded");
    if (before.resumableWalk !== null) expect(lastRun(db).walk_id).toBe(before.resumableWalk);
    expect(detailRequests(), ctx(KILLS)).toBe(before.remaining);
    expect(problems(db)).toEqual([]);
    expect(diffAgainstTruth(db, truth)).toEqual([]);
    // Killed runs were found 'running' by their successor and marked interrupted.
    const statuses = withDb(db, (d) => d.prepare("SELECT status FROM sync_runs").all() as Array<{ status: string }>).map((r) => r.status);
    expect(statuses.filter((s) => s === "running")).toEqual([]);
    expect(statuses.filter((s) => s === "interrupted").length).toBeGreaterThanOrEqual(KILLS / 2);
    // The kill points are spread enough that most runs resumed a walk rather than starting one.
    expect(resumedRuns, ctx(KILLS)).toBeGreaterThanOrEqual(KILLS / 2);
  });
});

describe("one writer per database file", () => {
  it("a second process on the same file exits at once with exit 1 naming the lock, writes nothing, sends no request; the first ends equal to ground truth", async () => {
    const db = join(dir, "locked.db");
    sim.setFaults([SLOW]);
    sim.resetStats();
    // The second process talks to its own simulator (same data), so any request it sent would show there.
    const other = await startSimulator({ seed: 31, skus: SKUS, historyDepth: 20, apiKey: KEY });
    try {
      const first = start(db);
      spawned.push(first.child);
      // The first holds the lock before its first request.
      while (sim.stats().byEndpoint.detail < 20) {
        expect(first.child.exitCode, first.out()).toBeNull();
        await new Promise((r) => setTimeout(r, 20));
      }
      const second = start(db, other.baseUrl);
      spawned.push(second.child);
      const end2 = await second.closed;
      expect(end2.code).toBe(1);
      expect(second.out()).toMatch(/another inventory-mirror process is writing to .*locked\.db \(it holds .*locked\.db\.lock\)/);
      expect(other.stats().requests).toBe(0);
      // It gave up while the first was still at work: it did not wait for the lock.
      expect(first.child.exitCode).toBeNull();

      sim.setFaults([]);
      const end1 = await first.closed;
      expect(end1.code, first.out()).toBe(0);
      expect(diffAgainstTruth(db, truth)).toEqual([]);
      // Nothing of the second process is in the file: one run, the first's; the lock's holder is the first.
      const runs = withDb(db, (d) => d.prepare("SELECT pid, status FROM sync_runs").all());
      expect(runs).toEqual([{ pid: first.child.pid, status: "succeeded" }]);
      const holder = withDb(`${db}.lock`, (d) => d.prepare("SELECT pid FROM holder").all());
      expect(holder).toEqual([{ pid: first.child.pid }]);
    } finally {
      await other.close();
    }
  });
});

describe("SIGINT and SIGTERM", () => {
  for (const [sig, exitCode] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
  ] as const) {
    it(`${sig} mid-run: exits ${exitCode} within 5 s, the run is recorded interrupted, the file is consistent, and the next sync resumes the same walk to ground truth`, async () => {
      const db = join(dir, `${sig}.db`);
      sim.setFaults([SLOW]);
      sim.resetStats();
      const p = start(db);
      spawned.push(p.child);
      while (sim.stats().byEndpoint.detail < 40) {
        expect(p.child.exitCode, p.out()).toBeNull();
        await new Promise((r) => setTimeout(r, 20));
      }
      const sentAt = Date.now();
      p.child.kill(sig);
      const end = await p.closed;
      expect(end.at - sentAt).toBeLessThan(5_000);
      expect(end.code, p.out()).toBe(exitCode);
      expect(p.out()).toMatch(/sync: interrupted: interrupted before the run finished/);

      const run = lastRun(db);
      expect(run.status).toBe("interrupted");
      expect(run.finished_at).not.toBeNull();
      expect(withDb(db, (d) => d.prepare("SELECT count(*) AS n FROM sync_journal WHERE kind = 'interrupted' AND run_id = ?").get(run.id))).toEqual({ n: 1 });
      expect(problems(db)).toEqual([]);

      const before = walkState(db);
      expect(before.resumableWalk).toBe(run.walk_id);
      expect(before.remaining).toBeGreaterThan(0);
      sim.setFaults([]);
      sim.resetStats();
      const next = start(db);
      spawned.push(next.child);
      const end2 = await next.closed;
      expect(end2.code, next.out()).toBe(0);
      expect(lastRun(db)).toMatchObject({ status: "succeeded", walk_id: run.walk_id });
      expect(next.out()).toMatch(new RegExp(`resumed from run ${run.id}\\b`));
      expect(detailRequests()).toBe(before.remaining);
      expect(diffAgainstTruth(db, truth)).toEqual([]);
    });
  }
});
