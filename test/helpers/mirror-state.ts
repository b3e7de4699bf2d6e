/**
 * What a mirror database says after a run was stopped (killed, signalled, refused): the
 * state a resumed run starts from, and every way the file could disagree with ground truth
 * at the granularity of store.ts's units of work. Used by the crash and interrupt tests.
 */
import { existsSync } from "node:fs";
import type { ChildProcess } from "node:child_process";
import Database from "better-sqlite3";
import type { GroundTruth } from "../../src/simulator/index.js";
import { DEFAULTS } from "../../src/core/defaults.js";
import { historyTuple } from "../../src/bench/truth.js";
import { spawnCli } from "./cli.js";

export interface Proc {
  child: ChildProcess;
  out: () => string;
  /** Resolves when the process has exited and its output is closed; `at` is Date.now() at exit. */
  closed: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/** Start `sync --full` on `db` against the API at `baseUrl`. */
export function startFullSync(db: string, baseUrl: string, key: string): Proc {
  const child = spawnCli(["sync", "--full", "--no-progress"], { env: { INVENTORY_API_KEY: key, INVENTORY_BASE_URL: baseUrl, INVENTORY_DB: db } });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  let exitAt = 0;
  child.on("exit", () => (exitAt = Date.now()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, at: exitAt || Date.now() }));
  });
  return { child, out: () => out, closed };
}

export function withDb<T>(path: string, f: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return f(db);
  } finally {
    db.close();
  }
}

/**
 * Rows of a read-only query on a mirror that may not exist yet or be mid-write (a sync in
 * another process): [] until the file and its tables are there.
 */
export function queryWhileWriting<T>(path: string, sql: string): T[] {
  try {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      return db.prepare(sql).all() as T[];
    } finally {
      db.close();
    }
  } catch {
    return [];
  }
}

/** SKUs whose detail and history are stored (a walk's progress), 0 before the file exists. */
export function storedSkus(path: string): number {
  return queryWhileWriting<{ n: number }>(path, "SELECT count(*) AS n FROM sku_sync WHERE fetched_walk_id IS NOT NULL")[0]?.n ?? 0;
}

export interface WalkState {
  /** The walk the next `sync --full` resumes, or null when it starts a new one. */
  resumableWalk: number | null;
  /** SKUs whose detail + history are still to fetch in that walk: what the next run must request, no more. */
  remaining: number;
  /** sku_id -> fetched_at and fetched_walk_id, to tell what a run committed. */
  fetchedAt: Map<string, string>;
  fetchedWalk: Map<string, number>;
  runs: number;
}

/** What the database says the next full run has left to do (read before it starts). */
export function walkState(path: string, tr: GroundTruth): WalkState {
  const empty = { resumableWalk: null, remaining: tr.skus.length, fetchedAt: new Map<string, string>(), fetchedWalk: new Map<string, number>(), runs: 0 };
  if (!existsSync(path)) return empty;
  return withDb(path, (db) => {
    if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sync_runs'").get()) return empty;
    const last = db.prepare("SELECT mode, status, walk_id FROM sync_runs ORDER BY id DESC LIMIT 1").get() as { mode: string; status: string; walk_id: number | null } | undefined;
    const runs = (db.prepare("SELECT count(*) AS n FROM sync_runs").get() as { n: number }).n;
    const fetched = db.prepare("SELECT sku_id, fetched_at, fetched_walk_id FROM sku_sync WHERE fetched_at IS NOT NULL").all() as Array<{ sku_id: string; fetched_at: string; fetched_walk_id: number }>;
    const fetchedAt = new Map(fetched.map((r) => [r.sku_id, r.fetched_at]));
    const fetchedWalk = new Map(fetched.map((r) => [r.sku_id, r.fetched_walk_id]));
    // store.startRun resumes the latest run's walk when it is a full run that did not succeed.
    const resumableWalk = last && last.mode === "full" && last.status !== "succeeded" ? last.walk_id : null;
    const done = resumableWalk === null ? 0 : (db.prepare("SELECT count(*) AS n FROM sku_sync WHERE fetched_walk_id = ?").get(resumableWalk) as { n: number }).n;
    return { resumableWalk, remaining: tr.skus.length - done, fetchedAt, fetchedWalk, runs };
  });
}

/** SKUs whose detail + history a run committed: their fetched_at changed (or appeared). */
export function committedSince(path: string, before: WalkState): string[] {
  if (!existsSync(path)) return [];
  const rows = withDb(path, (db) =>
    db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sku_sync'").get()
      ? (db.prepare("SELECT sku_id, fetched_at FROM sku_sync WHERE fetched_at IS NOT NULL").all() as Array<{ sku_id: string; fetched_at: string }>)
      : [],
  );
  const after = new Map(rows.map((r) => [r.sku_id, r.fetched_at]));
  return [...after].filter(([id, at]) => before.fetchedAt.get(id) !== at).map(([id]) => id);
}

/**
 * Everything that is wrong with the file as a stopped run left it, against ground truth `tr`
 * (the server's data does not change during these runs, so every committed unit must equal
 * it; `gone` are SKUs the server removed after an earlier walk stored them, checked against
 * what they were). Units of work, as store.ts commits them:
 * - integrity: PRAGMA integrity_check says ok; no foreign key violations.
 * - locations tree: no rows, or every location exactly.
 * - list page: a SKU row exists only with its fields and root quantities exactly as listed
 *   (and not marked deleted, unless it is one the server removed: `gone`).
 * - one SKU: sku_sync.fetched_at is set in the transaction that writes detail + history. A SKU
 *   with fetched_at has every leaf row and every history row exactly as ground truth (the
 *   history as a multiset: every copy of identical rows, no more); a SKU without it has no leaf row and no history row.
 *   That is "no half SKU".
 * - checkpoint: the latest run's walk has listed exactly the first N SKUs in list order, N a
 *   whole number of pages (or all, with list_done set), its cursor set iff the walk is
 *   under way, and each SKU it listed is either queued (pending) or fetched in it.
 */
export function consistencyProblems(
  path: string,
  tr: GroundTruth,
  gone: GroundTruth["skus"] = [],
  /** The list endpoint's order (default: by id, as ground truth) and page size (default the sync's), for servers that differ. */
  list: { order?: string[]; pageSize?: number } = {},
): string[] {
  if (!existsSync(path)) return [];
  return withDb(path, (db) => {
    const problems: string[] = [];
    const integrity = db.pragma("integrity_check") as Array<{ integrity_check: string }>;
    if (integrity.length !== 1 || integrity[0]!.integrity_check !== "ok") problems.push(`integrity_check: ${JSON.stringify(integrity)}`);
    const fk = db.pragma("foreign_key_check") as unknown[];
    if (fk.length) problems.push(`foreign_key_check: ${JSON.stringify(fk)}`);
    if (!db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sync_runs'").get()) {
      // Killed before or during the first migration: nothing may be there at all.
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all();
      if (tables.length) problems.push(`a schema without sync_runs: ${JSON.stringify(tables)}`);
      return problems;
    }

    const locs = db.prepare("SELECT id FROM locations").all() as Array<{ id: string }>;
    if (locs.length !== 0 && locs.length !== tr.locations.length) problems.push(`${locs.length} locations stored, ${tr.locations.length} in truth`);

    // SKUs the server removed since an earlier walk stored them: still checked against what they were.
    const goneIds = new Set(gone.map((t) => t.item.id as string));
    const bySku = new Map([...gone, ...tr.skus].map((t) => [t.item.id as string, t]));
    const skus = db.prepare("SELECT * FROM skus").all() as Array<Record<string, unknown>>;
    const rootQ = db.prepare("SELECT root_location_id, quantity FROM sku_root_quantities WHERE sku_id = ? ORDER BY root_location_id");
    for (const r of skus) {
      const t = bySku.get(r.id as string);
      if (!t) {
        problems.push(`SKU ${r.id} stored but not in truth`);
        continue;
      }
      const item = t.item as Record<string, unknown> & { product: Record<string, unknown>; locationQuantities: Record<string, number> };
      const got = [r.code, r.sku_code, r.name, r.total_quantity, r.product_id, r.deleted_at];
      const want = [item.code, item.skuCode, item.name, item.totalQuantity, item.product.id, goneIds.has(r.id as string) ? r.deleted_at : null];
      if (JSON.stringify(got) !== JSON.stringify(want)) problems.push(`SKU ${r.id} row: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
      const wantRoots = Object.entries(item.locationQuantities)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => ({ root_location_id: k, quantity: v }));
      if (JSON.stringify(rootQ.all(r.id)) !== JSON.stringify(wantRoots)) problems.push(`SKU ${r.id} root quantities differ from its list item`);
    }

    const leafQ = db.prepare("SELECT location_id, quantity, freshness_status FROM sku_location_quantities WHERE sku_id = ? ORDER BY location_id");
    const hist = db.prepare(`SELECT kind, occurred_at AS occurredAt, direction, quantity, location_id AS locationId, location_name AS locationName,
      location_code AS locationCode, event_id AS eventId, event_type_code AS eventTypeCode, event_type_name AS eventTypeName,
      set_session_id AS setSessionId, set_type_code AS setTypeCode, observed_quantity AS observedQuantity, note FROM history WHERE sku_id = ?`);
    const syncRows = db.prepare("SELECT sku_id, fetched_at FROM sku_sync").all() as Array<{ sku_id: string; fetched_at: string | null }>;
    const known = new Set(syncRows.map((s) => s.sku_id));
    for (const s of syncRows) {
      const t = bySku.get(s.sku_id);
      if (!t) {
        problems.push(`sku_sync row for ${s.sku_id}, not in truth`);
        continue;
      }
      const leaves = leafQ.all(s.sku_id) as Array<Record<string, unknown>>;
      const history = (hist.all(s.sku_id) as Array<Record<string, unknown>>).map(historyTuple).sort();
      if (s.fetched_at === null) {
        if (leaves.length || history.length) problems.push(`half SKU ${s.sku_id}: not committed, yet ${leaves.length} leaf rows and ${history.length} history rows`);
        continue;
      }
      const detail = (t.detail as { locations: Array<{ id: string; quantity: number; freshness?: { status?: string | null } }> }).locations
        .map((l) => ({ location_id: l.id, quantity: l.quantity, freshness_status: l.freshness?.status ?? null }))
        .sort((a, b) => (a.location_id < b.location_id ? -1 : 1));
      if (JSON.stringify(leaves) !== JSON.stringify(detail)) problems.push(`half SKU ${s.sku_id}: committed, but its leaf rows differ from its detail`);
      const want = (t.history as Array<Record<string, unknown>>).map(historyTuple).sort();
      if (JSON.stringify(history) !== JSON.stringify(want)) {
        problems.push(`half SKU ${s.sku_id}: committed with ${history.length} history rows (${new Set(history).size} distinct), truth has ${want.length}`);
      }
    }
    const orphans = db.prepare("SELECT count(*) AS n FROM (SELECT sku_id FROM history UNION SELECT sku_id FROM sku_location_quantities) WHERE sku_id NOT IN (SELECT sku_id FROM sku_sync)").get() as {
      n: number;
    };
    if (orphans.n) problems.push(`${orphans.n} SKUs with history or leaf rows but no sku_sync row`);

    const run = db.prepare("SELECT id, walk_id, list_cursor, list_done FROM sync_runs ORDER BY id DESC LIMIT 1").get() as
      | { id: number; walk_id: number; list_cursor: string | null; list_done: number }
      | undefined;
    if (run) {
      const listed = (db.prepare("SELECT sku_id FROM sku_sync WHERE listed_walk_id = ? ORDER BY sku_id").all(run.walk_id) as Array<{ sku_id: string }>).map((r) => r.sku_id);
      const firstN = (list.order ?? tr.skus.map((t) => t.item.id as string)).slice(0, listed.length).sort();
      if (JSON.stringify(listed) !== JSON.stringify(firstN)) problems.push(`walk ${run.walk_id} listed SKUs that are not the first ${listed.length} of the list`);
      const all = listed.length === tr.skus.length;
      const wholePages = listed.length % (list.pageSize ?? DEFAULTS.listPageSize) === 0 || all;
      if (!wholePages) problems.push(`walk ${run.walk_id} listed ${listed.length} SKUs: not a whole number of pages`);
      if ((run.list_done === 1) !== all) problems.push(`walk ${run.walk_id}: list_done ${run.list_done} with ${listed.length}/${tr.skus.length} listed`);
      if ((run.list_cursor !== null) !== (listed.length > 0 && !all)) problems.push(`walk ${run.walk_id}: list_cursor ${run.list_cursor ? "set" : "null"} with ${listed.length} listed`);
      const unaccounted = db.prepare("SELECT count(*) AS n FROM sku_sync WHERE listed_walk_id = @w AND pending_walk_id IS NOT @w AND fetched_walk_id IS NOT @w").get({ w: run.walk_id }) as {
        n: number;
      };
      if (unaccounted.n) problems.push(`walk ${run.walk_id}: ${unaccounted.n} listed SKUs neither queued nor fetched`);
      const both = db.prepare("SELECT count(*) AS n FROM sku_sync WHERE pending_walk_id = @w AND fetched_walk_id = @w").get({ w: run.walk_id }) as { n: number };
      if (both.n) problems.push(`walk ${run.walk_id}: ${both.n} SKUs both queued and fetched`);
    }
    for (const id of known) if (!bySku.has(id)) problems.push(`unknown SKU ${id}`);
    return problems;
  });
}

export const lastRun = (path: string) => withDb(path, (db) => db.prepare("SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1").get() as Record<string, unknown>);
