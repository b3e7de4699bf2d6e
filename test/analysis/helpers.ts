/**
 * What the analysis tests share: syncing a simulator into a file with the real CLI, the
 * per-run snapshot, and answers computed from the simulator's own state (its chronological
 * rows with their signed deltas), independently of the wire rules the program implements.
 */
import Database from "better-sqlite3";
import { expect } from "vitest";
import { ListResponse } from "../../src/core/api-schemas.js";
import type { GroundTruth, RunningSimulator } from "../../src/simulator/index.js";
import { saveSnapshot } from "../../src/store/list.js";
import { runCli } from "../helpers/cli.js";

export async function syncFull(sim: RunningSimulator, dbPath: string): Promise<void> {
  const r = await runCli(["sync", "--full", "--log-level", "warn"], {
    env: { INVENTORY_API_KEY: sim.apiKey, INVENTORY_BASE_URL: sim.baseUrl, INVENTORY_DB: dbPath },
  });
  expect(r.stderr).not.toMatch(/error/i);
  expect(r.code).toBe(0);
}

async function listPage(sim: RunningSimulator): Promise<ListResponse> {
  const res = await fetch(`${sim.baseUrl}/v1/external/inventory-status?limit=1`, {
    headers: { Authorization: `Bearer ${sim.apiKey}`, Accept: "application/json" },
  });
  expect(res.status).toBe(200);
  return ListResponse.parse(await res.json());
}

/**
 * The snapshot of the latest run: the sync writes it once the lead wires saveSnapshot into
 * the run loop; until then the test stores it itself, from the same (unchanged) server state.
 * Returns the list response the snapshot must equal and whether the sync had written it.
 */
export async function snapshotOfLatestRun(sim: RunningSimulator, dbPath: string): Promise<{ runId: number; page: ListResponse; writtenBySync: boolean }> {
  const page = await listPage(sim);
  const db = new Database(dbPath);
  try {
    const runId = (db.prepare("SELECT max(id) AS id FROM sync_runs").get() as { id: number }).id;
    const n = (db.prepare("SELECT count(*) AS n FROM inventory_snapshots WHERE run_id = ?").get(runId) as { n: number }).n;
    if (n === 0) saveSnapshot(db, runId, page.locations, page.summary);
    return { runId, page, writtenBySync: n > 0 };
  } finally {
    db.close();
  }
}

export interface SimRow {
  t: number;
  occurredAt: string;
  leafId: string;
  kind: "movement" | "set";
  /** Signed effect as the simulator applied it (for a SET: observed − balance before). */
  delta: number;
  /** Movement: amount moved; SET: the observed count. */
  amount: number;
}

/** The simulator's rows of every current SKU, chronological, grouped by leaf. */
export function simRows(sim: RunningSimulator): Map<string, Map<string, SimRow[]>> {
  const state = sim.model.state;
  const out = new Map<string, Map<string, SimRow[]>>();
  for (const sku of state.skus) {
    const byLeaf = new Map<string, SimRow[]>();
    for (const r of sku.rows) {
      const leafId = state.locations[r.leaf]!.id;
      let list = byLeaf.get(leafId);
      if (!list) byLeaf.set(leafId, (list = []));
      list.push({ t: r.t, occurredAt: new Date(r.t).toISOString(), leafId, kind: r.kind, delta: r.delta, amount: r.amount });
    }
    out.set(sku.id, byLeaf);
  }
  return out;
}

/** Balance after replaying rows up to and including time `at` (a SET sets, a movement adds). */
export function balanceAt(rows: SimRow[], at: number): number {
  let b = 0;
  for (const r of rows) {
    if (r.t > at) break;
    b = r.kind === "set" ? r.amount : b + r.delta;
  }
  return b;
}

export function truthMaps(truth: GroundTruth) {
  const locations = new Map(truth.locations.map((l) => [l.id, l]));
  const rootOf = (leafId: string) => locations.get(leafId)?.pathIds?.[0] ?? null;
  const sectionOf = (leafId: string) => {
    const p = locations.get(leafId)?.pathIds ?? [];
    return p.length >= 3 ? p[1]! : null;
  };
  const skus = new Map(truth.skus.map((s) => [s.item.id, s]));
  return { locations, rootOf, sectionOf, skus };
}

const cmp = (a: string | number | null | undefined, b: string | number | null | undefined): number =>
  a === b ? 0 : a === null || a === undefined ? -1 : b === null || b === undefined ? 1 : a < b ? -1 : 1;

export function sortBy<T>(rows: T[], ...keys: Array<(r: T) => string | number | null | undefined>): T[] {
  return rows.slice().sort((a, b) => {
    for (const k of keys) {
      const c = cmp(k(a), k(b));
      if (c) return c;
    }
    return 0;
  });
}
