/**
 * A server that names an absurd wait (issue 11, A1): ten years, or more digits than any date
 * can hold. The real CLI against the simulator on 127.0.0.1: the wait is capped at a day
 * (DEFAULTS.maxServerWaitMs) and journaled as suspicious, nothing crashes, and an operator
 * can clear the stored wall with `sync --ignore-quota-wall`. And one that names decimal seconds
 * ("2.5", outside RFC 9110's form): waited for as meant, not read as garbage (the 1 s floor).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type FaultRule, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_hostile_ra_5e4d3c2b1a09f8e7d6c5";
const DAY_MS = 24 * 60 * 60_000;
let sim: RunningSimulator;
let dir: string;
let config: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 21, skus: 40, historyDepth: 10, apiKey: KEY });
  dir = mkdtempSync(join(tmpdir(), "im-hostile-ra-"));
  config = join(dir, "config.json");
  writeFileSync(config, JSON.stringify({ retry: { backoffBaseMs: 20, backoffCapMs: 200 } }));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function sync(db: string, faults: FaultRule[], args: string[] = []) {
  sim.setFaults(faults);
  sim.resetStats();
  const r = await runCli(["sync", "--full", "--config", config, ...args], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
  return { ...r, stats: sim.stats() };
}
function rows<T>(db: string, sql: string): T[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare(sql).all() as T[];
  } finally {
    d.close();
  }
}
const lastRun = (db: string) => rows<{ status: string; resume_after: string | null }>(db, "SELECT status, resume_after FROM sync_runs ORDER BY id DESC LIMIT 1")[0]!;

describe("a server naming an absurd Retry-After", () => {
  it("ten years: the stored wall is at most a day away, journaled as suspicious; --ignore-quota-wall clears it and the mirror completes", async () => {
    const db = join(dir, "ten-years.db");
    const before = Date.now();
    const first = await sync(db, [{ kind: "429", after: 20, count: 1, retryAfter: "raw:315360000" }]);
    expect(first.code, first.stderr).toBe(1);
    const run = lastRun(db);
    expect(run.status).toBe("partial");
    const wall = Date.parse(run.resume_after!);
    expect(wall).toBeGreaterThan(before + DAY_MS - 60_000);
    expect(wall).toBeLessThanOrEqual(Date.now() + DAY_MS + 60_000);
    const suspicious = rows<{ retry_after: string; message: string }>(db, "SELECT retry_after, message FROM sync_journal WHERE kind = 'suspicious'");
    expect(suspicious).toHaveLength(1);
    expect(suspicious[0]!.retry_after).toBe("315360000");
    expect(suspicious[0]!.message).toMatch(/beyond 24 h/);

    // The wall holds a plain run back: no request at all.
    const held = await sync(db, []);
    expect(held.code).toBe(1);
    expect(held.stats.requests).toBe(0);

    // The operator clears it; the run is journaled as having ignored it and completes the mirror.
    const cleared = await sync(db, [], ["--ignore-quota-wall"]);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
    expect(rows(db, "SELECT 1 FROM sync_journal WHERE kind = 'info' AND message LIKE 'quota wall until % ignored (--ignore-quota-wall)'")).toHaveLength(1);

    // And it stays cleared: the next plain run goes ahead.
    const next = await sync(db, []);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stats.requests).toBeGreaterThan(0);
  });

  it("decimal seconds (2.5, outside the RFC's whole seconds): every worker waits them out, 0 violations, and the mirror completes", async () => {
    // A simulator of its own: the ten-year deadline above stays in the shared one's ledger.
    const own = await startSimulator({ seed: 22, skus: 40, historyDepth: 10, apiKey: KEY });
    try {
      own.setFaults([{ kind: "429", after: 20, count: 2, retryAfter: "raw:2.5" }]);
      const db = join(dir, "decimal.db");
      const r = await runCli(["sync", "--full", "--config", config], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: own.baseUrl, INVENTORY_DB: db } });
      expect(r.code, r.stderr).toBe(0);
      const stats = own.stats();
      expect(stats.byStatus["429"]).toBe(2);
      expect(stats.retryAfterViolations).toEqual([]);
      expect(diffAgainstTruth(db, own.groundTruth())).toEqual([]);
    } finally {
      await own.close();
    }
  });

  it("more digits than any date can hold: no crash, the run ends partial with a wall a day away and says why", async () => {
    const db = join(dir, "digits.db");
    const r = await sync(db, [{ kind: "429", after: 20, count: 1, retryAfter: "raw:99999999999999" }]);
    expect(r.code).toBe(1);
    expect(r.stderr).not.toMatch(/Invalid time value/);
    expect(r.stderr).toMatch(/beyond 24 h/);
    const run = lastRun(db);
    expect(run.status).toBe("partial");
    expect(Date.parse(run.resume_after!) - Date.now()).toBeLessThanOrEqual(DAY_MS + 60_000);
    expect(rows(db, "SELECT 1 FROM sync_journal WHERE kind = 'suspicious'")).toHaveLength(1);
  });
});
