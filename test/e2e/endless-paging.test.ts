/**
 * A server whose paging never ends, and a run that never ends (issue 11, A2). The real CLI
 * against the simulator on 127.0.0.1 (hostile-cursor.ts): an endless SKU history fails that
 * SKU past DEFAULTS.maxHistoryRowsPerSku rows while the run goes on and the other SKUs end
 * equal to ground truth; an endless list stops the walk past what summary.skuCount needs;
 * a run past sync.maxRunSeconds ends partial, and the next run resumes it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { DEFAULTS } from "../../src/core/defaults.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_endless_9f8e7d6c5b4a39281706";
let dir: string;
const sims: RunningSimulator[] = [];
let n = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-endless-"));
});
afterAll(async () => {
  for (const s of sims) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

function config(extra: Record<string, unknown> = {}): string {
  const p = join(dir, `config-${++n}.json`);
  writeFileSync(p, JSON.stringify({ retry: { backoffBaseMs: 20, backoffCapMs: 100 }, ...extra }));
  return p;
}
function rows<T>(db: string, sql: string): T[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare(sql).all() as T[];
  } finally {
    d.close();
  }
}

describe("paging that never ends", () => {
  it("an endless SKU history: that SKU fails past the row bound, the run goes on, every other SKU equals ground truth", async () => {
    const probe = await startSimulator({ seed: 51, skus: 60, historyDepth: 100, apiKey: KEY });
    const first = probe.groundTruth().skus[0]!;
    const endless = [(first.item as { id: string }).id.toLowerCase()];
    // Each endless page repeats the SKU's first page: its rows, up to the page size.
    const rowsPerPage = Math.min((first.history as unknown[]).length, DEFAULTS.historyPageSize);
    // What the other SKUs' histories take: their pages, once each.
    const otherPages = probe
      .groundTruth()
      .skus.slice(1)
      .reduce((n, s) => n + Math.max(1, Math.ceil((s.history as unknown[]).length / DEFAULTS.historyPageSize)), 0);
    await probe.close();
    const sim = await startSimulator({ seed: 51, skus: 60, historyDepth: 100, apiKey: KEY, endlessCursors: { history: endless } });
    sims.push(sim);
    const db = join(dir, `history-${++n}.db`);
    const r = await runCli(["sync", "--full", "--no-progress", "--config", config()], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(r.code, r.stderr).toBe(1);
    expect(rows<{ status: string }>(db, "SELECT status FROM sync_runs")).toEqual([{ status: "partial" }]);
    const failed = rows<{ sku_id: string; message: string }>(db, "SELECT sku_id, message FROM sync_journal WHERE kind = 'sku_failed'");
    expect(failed.map((f) => f.sku_id.toLowerCase())).toEqual(endless);
    expect(failed[0]!.message).toMatch(/more than 100,000 rows and the server keeps returning pages/);
    // Bounded: the endless walk stopped within a page of the row bound. Each endless page repeats the one
    // before, an overlap (walker.ts fetchSku) that starts the walk again twice: after 2 pages, then after 3.
    const historyRequests = sim.stats().byEndpoint.history;
    expect(historyRequests).toBeLessThanOrEqual(Math.ceil(DEFAULTS.maxHistoryRowsPerSku / rowsPerPage) + 2 + otherPages + 2 + 3);
    const others = diffAgainstTruth(db, sim.groundTruth()).filter((d) => !endless.some((id) => d.toLowerCase().includes(id)));
    expect(others).toEqual([]);
  });

  it("an endless list: the walk stops past what summary.skuCount needs, with a clear error", async () => {
    const sim = await startSimulator({ seed: 52, skus: 30, historyDepth: 3, apiKey: KEY, endlessCursors: { list: true } });
    sims.push(sim);
    const db = join(dir, `list-${++n}.db`);
    const r = await runCli(["sync", "--full", "--no-progress", "--config", config()], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/list: the server returned more than \d+ pages for 30 SKUs/);
    expect(sim.stats().byEndpoint.list).toBeLessThanOrEqual(Math.ceil(30 / DEFAULTS.listPageSize) + DEFAULTS.listPageMargin + 1);
  });

  it("a run past sync.maxRunSeconds ends partial; the next run resumes and completes it", async () => {
    const sim = await startSimulator({ seed: 53, skus: 120, historyDepth: 3, apiKey: KEY, quota: { requestsPerSecond: 20, burst: 5 } });
    sims.push(sim);
    const db = join(dir, `deadline-${++n}.db`);
    const env = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db };
    const r = await runCli(["sync", "--full", "--no-progress", "--config", config({ sync: { maxRunSeconds: 2 } })], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/reached its deadline of 2 s \(sync\.maxRunSeconds\)/);
    expect(rows<{ status: string }>(db, "SELECT status FROM sync_runs")).toEqual([{ status: "partial" }]);
    expect(rows(db, "SELECT 1 FROM sync_journal WHERE kind = 'partial' AND message LIKE '%deadline%'")).toHaveLength(1);
    sim.setQuota(null);
    const next = await runCli(["sync", "--full", "--no-progress", "--config", config()], { env });
    expect(next.code, next.stderr).toBe(0);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });
});
