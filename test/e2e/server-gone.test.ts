/**
 * The server goes away in the middle of a run (issue 11, A3). The real CLI syncs from the
 * simulator on 127.0.0.1; once part of the SKUs are stored the simulator is closed (listener
 * and every socket, as a killed process leaves them). The run must say which server is
 * unreachable, stop as partial with nothing counted as a failed SKU, and the next sync
 * against the server (back, same data) must resume and end equal to ground truth.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { runCli, spawnCli } from "../helpers/cli.js";
import { diffAgainstTruth } from "../helpers/ground-truth.js";
import { storedSkus } from "../helpers/mirror-state.js";

const KEY = "sim_e2e_server_gone_0a1b2c3d4e5f6a7b8c9d";
const SIM = { seed: 41, skus: 300, historyDepth: 8, apiKey: KEY } as const;
let dir: string;
let config: string;
const sims: RunningSimulator[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "im-gone-"));
  config = join(dir, "config.json");
  // Short backoffs keep the tests quick; retries that cannot run out before the 3 s of failed
  // connects that make a server unreachable (with 6 retries, 7 jittered attempts fit in 3 s about
  // one time in four, and the request gave up instead: a flaky test).
  writeFileSync(config, JSON.stringify({ retry: { backoffBaseMs: 100, backoffCapMs: 2_000, maxRetries: 100 } }));
});
afterAll(async () => {
  for (const s of sims) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

async function until(cond: () => boolean, what: string, maxMs = 60_000): Promise<void> {
  const end = Date.now() + maxMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe("the server goes away mid-run", () => {
  it("the run stops as partial naming the unreachable server, no SKU counted failed; the next run resumes to ground truth", async () => {
    const first = await startSimulator({ ...SIM, quota: { requestsPerSecond: 150 } });
    sims.push(first);
    const db = join(dir, "gone.db");
    const child = spawnCli(["sync", "--full", "--no-progress", "--config", config], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: first.baseUrl, INVENTORY_DB: db } });
    let stderr = "";
    child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));

    await until(() => storedSkus(db) >= 30, "30 SKUs stored");
    await first.close();
    const code = await exited;

    expect(code).toBe(1);
    expect(stderr).toMatch(new RegExp(`the server at ${first.baseUrl.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is unreachable`));
    const d = new Database(db, { readonly: true });
    try {
      const run = d.prepare("SELECT status, skus_failed FROM sync_runs ORDER BY id DESC LIMIT 1").get() as { status: string; skus_failed: number | null };
      expect(run.status).toBe("partial");
      expect(run.skus_failed ?? 0).toBe(0);
      expect(d.prepare("SELECT count(*) AS n FROM sync_journal WHERE kind = 'sku_failed'").get()).toEqual({ n: 0 });
      expect(d.prepare("SELECT count(*) AS n FROM sync_journal WHERE kind = 'partial' AND message LIKE '%is unreachable%'").get()).toEqual({ n: 1 });
    } finally {
      d.close();
    }
    const storedBefore = storedSkus(db);
    expect(storedBefore).toBeGreaterThanOrEqual(30);
    expect(storedBefore).toBeLessThan(SIM.skus);

    // The server is back (same data): the next run resumes the walk and completes the mirror.
    const back = await startSimulator(SIM);
    sims.push(back);
    const r = await runCli(["sync", "--full", "--no-progress", "--config", config], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: back.baseUrl, INVENTORY_DB: db } });
    expect(r.code, r.stderr).toBe(0);
    expect(diffAgainstTruth(db, back.groundTruth())).toEqual([]);
    expect(back.stats().byEndpoint.detail ?? 0).toBeLessThanOrEqual(SIM.skus - storedBefore + 8);
  });
});

describe("a server that is not there at all", () => {
  it("check against a closed port says the server is unreachable (exit 1), after a few connection attempts", async () => {
    const r = await runCli(["check", "--config", config], { env: { INVENTORY_API_KEY: KEY, INVENTORY_BASE_URL: "http://127.0.0.1:9" } });
    expect(r.code).toBe(1);
    expect(r.stderr, r.stderr).toMatch(/the server at http:\/\/127\.0\.0\.1:9 is unreachable: \d+ attempts in [\d.]+ s failed to connect \(ECONNREFUSED\)/);
  });
});
