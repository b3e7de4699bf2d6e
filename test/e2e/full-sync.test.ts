/**
 * `inventory-mirror sync --full` end to end: the real CLI in a child process, the real
 * simulator over HTTP on 127.0.0.1, a real SQLite file, compared with the simulator's
 * ground truth row by row.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli } from "../helpers/cli.js";
import { diffAgainstTruth, tableCounts } from "../helpers/ground-truth.js";

const KEY = "sim_e2e_full_5c1f0b8a9d7e6c5b4a3f2e1d";
let sim: RunningSimulator;
let dir: string;

beforeAll(async () => {
  // 300 SKUs with a deep history: several SKUs need more than one 100-row history page.
  sim = await startSimulator({ seed: 7, skus: 300, historyDepth: 25, apiKey: KEY, prefix: "/api" });
  dir = mkdtempSync(join(tmpdir(), "im-full-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = (db: string) => ({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: db });

describe("sync --full", () => {
  it("mirrors the whole workspace: every location, SKU, leaf quantity and history row equals the simulator's", async () => {
    const db = join(dir, "full.db");
    const truth = sim.groundTruth();
    // The fixture exercises what it claims to: history paging, non-clean freshness, and set rows.
    expect(truth.skus.some((s) => s.history.length > 100)).toBe(true);
    expect(truth.skus.some((s) => (s.detail.locations ?? []).some((l) => l.freshness?.status !== "clean"))).toBe(true);
    expect(truth.skus.some((s) => s.history.some((h) => h.kind === "set"))).toBe(true);

    sim.resetStats();
    const r = await runCli(["sync", "--full"], { env: env(db) });
    expect(r.stderr).not.toMatch(/error/i);
    expect(r.code).toBe(0);
    expect(diffAgainstTruth(db, truth)).toEqual([]);

    const historyRows = truth.skus.reduce((n, s) => n + s.history.length, 0);
    expect(r.stdout).toContain(`sync --full succeeded`);
    expect(r.stdout).toContain(`${truth.skus.length} listed, ${truth.skus.length} fetched, 0 failed`);
    expect(r.stdout).toContain(`${historyRows} rows added`);

    // The run is recorded with its counters, equal to what the server counted.
    const d = new Database(db, { readonly: true });
    const run = d.prepare("SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1").get() as Record<string, number | string>;
    d.close();
    expect(run).toMatchObject({ mode: "full", status: "succeeded", skus_fetched: truth.skus.length, history_rows_added: historyRows });
    expect(run.requests).toBe(sim.stats().requests);
    expect(JSON.parse(run.requests_by_endpoint as string)).toEqual(Object.fromEntries(Object.entries(sim.stats().byEndpoint).filter(([, n]) => n > 0)));
  });

  it("a rerun on an unchanged workspace adds no rows and changes no data", async () => {
    const db = join(dir, "rerun.db");
    const first = await runCli(["sync", "--full"], { env: env(db) });
    expect(first.code).toBe(0);
    const before = tableCounts(db);
    const dump = (p: string) => {
      const d = new Database(p, { readonly: true });
      const rows = {
        skus: d.prepare("SELECT id, code, name, total_quantity, options, deleted_at FROM skus ORDER BY id").all(),
        leaf: d.prepare("SELECT sku_id, location_id, quantity, freshness_status FROM sku_location_quantities ORDER BY 1, 2").all(),
        history: d.prepare("SELECT sku_id, row_key FROM history ORDER BY 1, 2").all(),
      };
      d.close();
      return rows;
    };
    const rowsBefore = dump(db);
    const second = await runCli(["sync", "--full"], { env: env(db) });
    expect(second.code).toBe(0);
    expect(second.stdout).toContain("0 rows added");
    expect(tableCounts(db)).toEqual(before);
    expect(dump(db)).toEqual(rowsBefore);
    expect(diffAgainstTruth(db, sim.groundTruth())).toEqual([]);
  });

  it("a SKU the server no longer returns is marked deleted, keeps its history, and leaves current data", async () => {
    const s2 = await startSimulator({ seed: 11, skus: 40, apiKey: KEY });
    try {
      const db = join(dir, "removed.db");
      const e = { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: s2.baseUrl, INVENTORY_DB: db };
      expect((await runCli(["sync", "--full"], { env: e })).code).toBe(0);
      const victim = s2.groundTruth().skus.find((s) => s.history.length > 0)!.item.id;
      s2.model.removeSku(victim);
      const r = await runCli(["sync", "--full"], { env: e });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("1 marked deleted");
      expect(diffAgainstTruth(db, s2.groundTruth())).toEqual([]);
      const d = new Database(db, { readonly: true });
      const row = d.prepare("SELECT deleted_at FROM skus WHERE id = ?").get(victim) as { deleted_at: string | null };
      const hist = d.prepare("SELECT count(*) AS n FROM history WHERE sku_id = ?").get(victim) as { n: number };
      const inView = d.prepare("SELECT count(*) AS n FROM stock_by_location WHERE sku_id = ?").get(victim) as { n: number };
      d.close();
      expect(row.deleted_at).not.toBeNull();
      expect(hist.n).toBeGreaterThan(0);
      expect(inView.n).toBe(0);
    } finally {
      await s2.close();
    }
  });

  it("creates the database owner-only (0600)", async () => {
    const db = join(dir, "full.db");
    expect(statSync(db).mode & 0o777).toBe(0o600);
  });

  it("check prints the workspace id, name and scope", async () => {
    const r = await runCli(["check"], { env: env(join(dir, "unused.db")) });
    expect(r.code).toBe(0);
    const ws = sim.groundTruth().workspace;
    expect(r.stdout).toContain(`workspace id:   ${ws.workspace.id}`);
    expect(r.stdout).toContain(`workspace name: ${ws.workspace.name}`);
    expect(r.stdout).toContain("scope:          read");
  });

  it("stores no trace of the key in the database file or its WAL", async () => {
    for (const f of ["full.db", "full.db-wal", "rerun.db"]) {
      let bytes: Buffer;
      try {
        bytes = readFileSync(join(dir, f));
      } catch {
        continue;
      }
      expect(bytes.includes(Buffer.from(KEY))).toBe(false);
    }
  });
});
