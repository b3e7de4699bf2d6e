/**
 * Smaller things a careless operator runs into (issue 11, B10), each with the real CLI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { queryWhileWriting, storedSkus } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_cli_details_2b3c4d5e6f7a8b9c0d1e";
let sim: RunningSimulator;
let dir: string;
const env = (extra: Record<string, string> = {}) => ({ INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: join(dir, "m.db"), ...extra });

beforeAll(async () => {
  sim = await startSimulator({ seed: 91, skus: 120, historyDepth: 4, apiKey: KEY, quota: { requestsPerSecond: 100 } });
  dir = mkdtempSync(join(tmpdir(), "im-cli-details-"));
});
afterAll(async () => {
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("help", () => {
  it("`sync -h` and `help sync` print the sync command's help", async () => {
    for (const args of [
      ["sync", "-h"],
      ["help", "sync"],
    ]) {
      const r = await runCli(args, { env: env() });
      expect(r.code, args.join(" ")).toBe(0);
      expect(r.stdout, args.join(" ")).toMatch(/^Usage: inventory-mirror sync \[--full\]/);
    }
  });

  it("the global help names INVENTORY_DAEMON_LISTEN", async () => {
    const r = await runCli(["--help"], { env: env() });
    expect(r.stdout).toMatch(/INVENTORY_DAEMON_LISTEN\s+as daemon --listen/);
  });
});

describe("mistakes caught before any request", () => {
  const cases: Array<{ args: string[]; says: RegExp }> = [
    { args: ["sync", "--max-requests", "-5"], says: /--max-requests: expected a positive number, got "-5"/ },
    { args: ["sync", "--max-rps", "-1"], says: /--max-rps: expected a positive number, got "-1"/ },
    { args: ["check", "--expected-workspace-id", "not-a-uuid"], says: /expected workspace id "not-a-uuid" .* is not a UUID/ },
    { args: ["check", "--base-url", "http://127.0.0.1:1/v1/external"], says: /ends with \/v1\/external.*use http:\/\/127\.0\.0\.1:1/ },
    { args: ["stock", "--at", "2026-02-30"], says: /--at: "2026-02-30" is not a date on the calendar \(2026-02 has 28 days\)/ },
    { args: ["stock", "--at", "2026-04-31T10:00:00Z"], says: /not a date on the calendar/ },
  ];
  for (const c of cases) {
    it(`${c.args.join(" ")}: exit 2, says what is wrong, no request`, async () => {
      sim.resetStats();
      const r = await runCli(c.args, { env: env() });
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(c.says);
      expect(r.stderr).not.toMatch(/ambiguous/);
      expect(sim.stats().requests).toBe(0);
    });
  }
});

describe("status after kill -9", () => {
  it("a run left 'running' by a dead process is shown as not running, and the next run resumes it", async () => {
    const db = join(dir, "killed.db");
    const child = spawnCli(["sync", "--full", "--no-progress"], { env: env({ INVENTORY_DB: db }) });
    child.stdout!.resume();
    child.stderr!.resume();
    const exited = new Promise((r) => child.on("exit", r));
    const stored = () => storedSkus(db);
    const end = Date.now() + 60_000;
    while (stored() < 10) {
      if (Date.now() > end) throw new Error("10 SKUs were not stored");
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGKILL");
    await exited;

    const human = await runCli(["status", "--db", db], { env: env() });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/running\s+none: run 1 \(full, started .*\) was left running by pid \d+, which is gone/);
    const json = JSON.parse((await runCli(["status", "--db", db, "--json"], { env: env() })).stdout);
    expect(json.running).toMatchObject({ id: 1, alive: false });

    const next = await runCli(["sync", "--no-progress"], { env: env({ INVENTORY_DB: db }) });
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).toMatch(/resumed from run 1/);
  });
});

describe("--sku by id or code", () => {
  it("reconcile and stock accept a SKU's code; an unknown id or code is exit 2, not 'consistent'", async () => {
    const db = join(dir, "sku.db");
    expect((await runCli(["sync", "--full", "--no-progress"], { env: env({ INVENTORY_DB: db }) })).code).toBe(0);
    const d = new Database(db, { readonly: true });
    const sku = d.prepare("SELECT id, code FROM skus ORDER BY code LIMIT 1").get() as { id: string; code: string };
    d.close();
    const byCode = await runCli(["reconcile", "--sku", sku.code, "--db", db, "--json"], { env: env() });
    expect(byCode.code, byCode.stderr).toBe(0);
    expect(JSON.parse(byCode.stdout).skuId).toBe(sku.id);
    const stockByCode = await runCli(["stock", "--at", new Date().toISOString(), "--sku", sku.code, "--db", db, "--json"], { env: env() });
    expect(stockByCode.code, stockByCode.stderr).toBe(0);
    for (const unknown of ["00000000-0000-4000-8000-00000000dead", "NO-SUCH-CODE"]) {
      for (const cmd of [["reconcile"], ["stock", "--at", "2026-01-01"]]) {
        const r = await runCli([...cmd, "--sku", unknown, "--db", db], { env: env() });
        expect(r.code, `${cmd[0]} ${unknown}`).toBe(2);
        expect(r.stderr).toMatch(new RegExp(`--sku ${unknown}: no SKU with that id or code`));
      }
    }
  });
});

describe("--log-level", () => {
  it("debug logs each list page and each SKU, trace each request too; info neither; the key in none", async () => {
    const counts: Record<string, { skus: number; pages: number; requests: number }> = {};
    for (const level of ["info", "debug", "trace"]) {
      const r = await runCli(["sync", "--full", "--no-progress", "--log-level", level, "--db", join(dir, `log-${level}.db`)], { env: env() });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toContain(KEY);
      const lines = r.stderr
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { msg: string });
      counts[level] = {
        skus: lines.filter((l) => l.msg === "SKU saved").length,
        pages: lines.filter((l) => l.msg === "list page saved").length,
        requests: lines.filter((l) => l.msg === "request").length,
      };
    }
    expect(counts.info).toEqual({ skus: 0, pages: 0, requests: 0 });
    expect(counts.debug).toEqual({ skus: 120, pages: 2, requests: 0 });
    expect(counts.trace!.skus).toBe(120);
    expect(counts.trace!.requests).toBeGreaterThanOrEqual(2 + 2 + 120 * 2);
  });
});

describe("reconcile: history at a leaf the detail does not report stock at", () => {
  it("a leaf no longer active keeps its history and leaves the detail and the totals: explained, exit 0 (and unexplained, exit 1, while the leaf is active)", async () => {
    const db = join(dir, "inactive.db");
    const full = await runCli(["sync", "--full", "--no-progress"], { env: env({ INVENTORY_DB: db }) });
    expect(full.code, full.stderr).toBe(0);
    expect((await runCli(["reconcile", "--db", db], { env: env() })).code).toBe(0);
    // As a server that made a leaf inactive would show it: the SKU's quantity there gone from its detail, its list
    // total and its root's quantity; the leaf's status not "active"; its history kept.
    const w = new Database(db);
    const held = w
      .prepare(`SELECT q.sku_id AS sku, q.location_id AS leaf, q.quantity AS qty, json_extract(l.path_ids, '$[0]') AS root FROM sku_location_quantities q
        JOIN locations l ON l.id = q.location_id WHERE q.quantity > 0 AND q.freshness_status = 'clean' AND EXISTS (SELECT 1 FROM history h WHERE h.sku_id = q.sku_id AND h.location_id = q.location_id) LIMIT 1`)
      .get() as { sku: string; leaf: string; qty: number; root: string };
    w.prepare("DELETE FROM sku_location_quantities WHERE sku_id = ? AND location_id = ?").run(held.sku, held.leaf);
    w.prepare("UPDATE skus SET total_quantity = total_quantity - ? WHERE id = ?").run(held.qty, held.sku);
    expect(w.prepare("UPDATE sku_root_quantities SET quantity = quantity - ? WHERE sku_id = ? AND root_location_id = ?").run(held.qty, held.sku, held.root).changes).toBe(1);
    w.close();
    const active = await runCli(["reconcile", "--sku", held.sku, "--db", db, "--json"], { env: env() });
    expect(active.code).toBe(1);
    const w2 = new Database(db);
    w2.prepare("UPDATE locations SET status = 'inactive' WHERE id = ?").run(held.leaf);
    w2.close();
    const r = await runCli(["reconcile", "--sku", held.sku, "--db", db, "--json"], { env: env() });
    expect(r.code, r.stdout).toBe(0);
    const report = JSON.parse(r.stdout) as { mismatches: Array<{ check: string; locationId: string | null; explained: boolean; explanation: string }> };
    const at = report.mismatches.filter((m) => m.locationId === held.leaf);
    expect(at.map((m) => [m.check, m.explained])).toEqual([["leaf_history", true]]);
    expect(at[0]!.explanation).toMatch(/the leaf has status "inactive", not "active", and the detail reports stock at active leaves only/);
  });
});

describe("reconcile while the server moved", () => {
  it("a difference between the list and a detail read seconds apart says they were read apart", async () => {
    const slow = await startSimulator({ seed: 92, skus: 20, historyDepth: 3, apiKey: KEY, quota: { requestsPerSecond: 10, burst: 2 } });
    try {
      const db = join(dir, "moved.db");
      const child = spawnCli(["sync", "--full", "--no-progress"], { env: env({ INVENTORY_DB: db, INVENTORY_BASE_URL: slow.baseUrl }) });
      child.stdout!.resume();
      child.stderr!.resume();
      const exited = new Promise<number | null>((r) => child.on("exit", (c) => r(c)));
      const read = <T>(sql: string): T[] => queryWhileWriting<T>(db, sql);
      // The list walk is done (20 SKUs fit one page) while most details are still to come.
      let unfetched: string[] = [];
      const end = Date.now() + 60_000;
      while (
        !(
          read<{ d: number }>("SELECT list_done AS d FROM sync_runs")[0]?.d === 1 &&
          (unfetched = read<{ id: string }>("SELECT sku_id AS id FROM sku_sync WHERE fetched_at IS NULL").map((r) => r.id)).length >= 4
        )
      ) {
        if (Date.now() > end) throw new Error("the list walk did not finish ahead of the details");
        await new Promise((r) => setTimeout(r, 10));
      }
      const moved = unfetched.at(-1)!;
      slow.model.movement(moved, slow.model.activeLeafIds()[0]!, 5);
      expect(await exited).toBe(0);

      const r = await runCli(["reconcile", "--sku", moved, "--db", db, "--json"], { env: env() });
      expect(r.code).toBe(1);
      const report = JSON.parse(r.stdout) as { mismatches: Array<{ check: string; explanation: string }> };
      const aggregate = report.mismatches.filter((m) => m.check === "sku_total" || m.check === "root_sum");
      expect(aggregate.length).toBeGreaterThan(0);
      for (const m of aggregate) expect(m.explanation).toMatch(/the list row was read at .* and the detail at .*, [\d.]+ s apart: stock that moved in between/);
    } finally {
      await slow.close();
    }
  });
});
