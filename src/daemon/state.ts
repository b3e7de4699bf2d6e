/**
 * What the daemon and `status` read from (and, for skipped ticks, write to) the
 * mirror database, outside a sync run.
 *
 * Reads use their own short-lived read-only connection: the database is in WAL
 * mode, so they never block the writer and never see half a unit of work.
 *
 * Skipped ticks: a tick that finds a run in progress is journaled against that
 * run (sync_journal kind 'tick_skipped'). The daemon never holds the writer lock
 * itself (runSync takes `<db>.lock` and opens the database per run, and releases
 * both at its end, so a manual `sync` can run between two daemon runs). The
 * journal row is written while the run in hand holds the lock, so this process is
 * the one writer: through a second, short connection of the same process, one
 * single-row transaction, never inside runSync's transactions (they are
 * synchronous). A tick skipped before the run in hand has created its row (it is
 * still checking the workspace) is kept in memory and written at the run's first
 * progress report; if that run never starts (e.g. the key is refused), it is only
 * logged and counted in the metrics.
 */
import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { CLEAN_FRESHNESS } from "../core/api-schemas.js";
import { DEFAULTS } from "../core/defaults.js";
import type { Logger } from "../core/logger.js";
import type { DB } from "../store/db.js";
import type { RunMode } from "../store/store.js";

/** Journal kind of a tick that found a run in progress. */
export const TICK_SKIPPED = "tick_skipped";

/** A read-only connection, or null when the file does not exist or is not a mirror database yet. */
export function openReader(dbPath: string): DB | null {
  if (!existsSync(dbPath)) return null;
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  db.pragma(`busy_timeout = ${DEFAULTS.busyTimeoutMs}`);
  if (!hasTable(db, "sync_runs")) {
    db.close();
    return null;
  }
  return db;
}

export function hasTable(db: DB, name: string): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?").get(name) !== undefined;
}

function withReader<T>(dbPath: string, fallback: T, f: (db: DB) => T): T {
  const db = openReader(dbPath);
  if (!db) return fallback;
  try {
    return f(db);
  } finally {
    db.close();
  }
}

// ---- queries shared by the daemon and `status` ---------------------------------------------------

/** Epoch ms at which the last successful run (any mode) finished, or null. */
export function lastSuccessAt(db: DB): number | null {
  const row = db.prepare("SELECT max(finished_at) AS at FROM sync_runs WHERE status = 'succeeded'").get() as { at: string | null };
  return row.at ? Date.parse(row.at) : null;
}

/** Epoch ms of the last finished run's resume_after (a quota wall), or null. */
export function resumeAfterOf(db: DB): number | null {
  const row = db.prepare("SELECT resume_after AS at FROM sync_runs WHERE status <> 'running' ORDER BY id DESC LIMIT 1").get() as { at: string | null } | undefined;
  return row?.at ? Date.parse(row.at) : null;
}

/** Current SKU × location pairs whose freshness is not clean (the latest scan may not be reflected). */
const NOT_CLEAN_FROM = `
  FROM sku_location_quantities q
  JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
  LEFT JOIN locations l ON l.id = q.location_id
  WHERE l.deleted_at IS NULL AND q.freshness_status IS NOT '${CLEAN_FRESHNESS}'`;

export function countNotClean(db: DB): { pairs: number; skus: number } {
  return db.prepare(`SELECT count(*) AS pairs, count(DISTINCT q.sku_id) AS skus ${NOT_CLEAN_FROM}`).get() as { pairs: number; skus: number };
}

export interface NotCleanItem {
  skuId: string;
  skuCode: string | null;
  skuName: string | null;
  locationId: string;
  location: string | null;
  status: string | null;
  notCleanSince: string | null;
  lastReplayedAt: string | null;
  fetchedAt: string;
}

/** The longest-standing first. */
export function listNotClean(db: DB, limit: number): NotCleanItem[] {
  return db
    .prepare(
      `SELECT q.sku_id AS skuId, s.code AS skuCode, s.name AS skuName, q.location_id AS locationId,
              COALESCE(l.display_path, q.location_name) AS location, q.freshness_status AS status,
              q.not_clean_since AS notCleanSince, q.freshness_last_replayed_at AS lastReplayedAt, q.fetched_at AS fetchedAt
       ${NOT_CLEAN_FROM}
       ORDER BY q.not_clean_since IS NULL, q.not_clean_since, q.sku_id, q.location_id
       LIMIT ?`,
    )
    .all(limit) as NotCleanItem[];
}

/**
 * Responses of one run by endpoint and status, derived from what the run recorded:
 * every attempt that did not succeed is journaled once by the scheduler (kind
 * 'backoff' when retried, 'error' when it was the last), with its endpoint and
 * status; the rest of the run's requests per endpoint are counted as "2xx".
 * Attempts without an HTTP status (network, timeout) are "error". A request cut
 * off by an interrupt counts as 2xx: the derivation is exact for runs that ended
 * on their own.
 */
export function responsesByEndpointStatus(db: DB, runId: number, requestsByEndpoint: Record<string, number>): Record<string, Record<string, number>> {
  const rows = db
    .prepare(
      `SELECT endpoint, status, count(*) AS n FROM sync_journal
       WHERE run_id = ? AND kind IN ('backoff', 'error') AND endpoint IS NOT NULL
       GROUP BY endpoint, status`,
    )
    .all(runId) as Array<{ endpoint: string; status: number | null; n: number }>;
  const out: Record<string, Record<string, number>> = {};
  for (const r of rows) {
    const e = (out[r.endpoint] ??= {});
    const k = r.status == null ? "error" : String(r.status);
    e[k] = (e[k] ?? 0) + r.n;
  }
  for (const [endpoint, total] of Object.entries(requestsByEndpoint)) {
    const e = (out[endpoint] ??= {});
    const failed = Object.values(e).reduce((a, b) => a + b, 0);
    if (total - failed > 0) e["2xx"] = total - failed;
  }
  return out;
}

// ---- the daemon's view ----------------------------------------------------------------------------

/** What the daemon reads from the database between runs (injectable for tests). */
export interface StateReader {
  /** Epoch ms of the last successful run's end, or null (no database, no success yet). */
  lastSuccess(): number | null;
  /** Epoch ms before which the last finished run asked not to retry (a quota wall), or null. */
  resumeAfter(): number | null;
  /** SKUs (current ones) with at least one location whose freshness is not clean; null without a database. */
  skusNotClean(): number | null;
  /** A finished run's responses by endpoint and status. */
  responses(runId: number, requestsByEndpoint: Record<string, number>): Record<string, Record<string, number>>;
}

export function dbStateReader(dbPath: string): StateReader {
  return {
    lastSuccess: () => withReader(dbPath, null, lastSuccessAt),
    resumeAfter: () => withReader(dbPath, null, resumeAfterOf),
    skusNotClean: () => withReader(dbPath, null, (db) => countNotClean(db).skus),
    responses: (runId, byEndpoint) => withReader(dbPath, {}, (db) => responsesByEndpointStatus(db, runId, byEndpoint)),
  };
}

// ---- skipped ticks ---------------------------------------------------------------------------------

export interface SkippedTick {
  /** The mode of the tick that was skipped. */
  mode: RunMode;
  /** Epoch ms of the tick. */
  at: number;
  message: string;
}

/** Where skipped ticks are journaled (injectable for tests). */
export interface TickJournal {
  skipped(t: SkippedTick): void;
  /** The run in hand reported progress: its row exists and this process holds the writer lock. */
  flush(): void;
  /** The run in hand ended (runId null: it never created its row). */
  runEnded(runId: number | null): void;
}

export class DbTickJournal implements TickJournal {
  private pending: SkippedTick[] = [];

  constructor(
    private readonly dbPath: string,
    private readonly logger: Logger,
  ) {}

  skipped(t: SkippedTick): void {
    this.pending.push(t);
    this.flush();
  }

  flush(runId?: number): void {
    if (this.pending.length === 0 || !existsSync(this.dbPath)) return;
    let db: DB | null = null;
    try {
      db = new Database(this.dbPath, { fileMustExist: true });
      db.pragma(`busy_timeout = ${DEFAULTS.busyTimeoutMs}`);
      if (!hasTable(db, "sync_runs")) return;
      const target =
        runId ??
        (db.prepare("SELECT id FROM sync_runs WHERE status = 'running' AND pid = ? ORDER BY id DESC LIMIT 1").get(process.pid) as { id: number } | undefined)?.id;
      if (target === undefined) return;
      const insert = db.prepare("INSERT INTO sync_journal (run_id, at, kind, message) VALUES (?, ?, ?, ?)");
      const entries = this.pending.splice(0);
      db.transaction(() => {
        for (const e of entries) insert.run(target, new Date(e.at).toISOString(), TICK_SKIPPED, e.message);
      })();
    } catch (err) {
      this.logger.warn({ err }, "could not journal a skipped tick");
    } finally {
      db?.close();
    }
  }

  runEnded(runId: number | null): void {
    if (runId !== null) this.flush(runId);
    if (this.pending.length) {
      this.logger.info({ skippedTicks: this.pending.length }, "skipped ticks not journaled: the run they were skipped for never started");
      this.pending = [];
    }
  }
}

// ---- `inventory-mirror status` -----------------------------------------------------------------------

export interface RunSummary {
  id: number;
  mode: string;
  status: string;
  startedAt: string;
  finishedAt: string | null;
  /** To the end, or to now for a run still in progress. */
  durationMs: number | null;
  walkId: number | null;
  pid: number | null;
  counters: {
    skusListed: number;
    skusPlanned: number;
    skusFetched: number;
    skusFailed: number;
    skusDeleted: number;
    locationsSeen: number;
    historyRowsAdded: number;
    requests: number;
    requestsByEndpoint: Record<string, number>;
    responses429: number;
    responses503: number;
    retries: number;
    waitMs: number;
  };
  resumeAfter: string | null;
  error: string | null;
}

export interface QuotaState {
  /** paused: the run in progress is waiting out a 429/503; waiting: a run hit the quota wall and no run should start before resumeAfter; clear: neither. */
  state: "clear" | "paused" | "waiting";
  /** The latest backoff of the latest run. */
  lastBackoff: {
    runId: number;
    at: string;
    endpoint: string | null;
    status: number | null;
    retryAfter: string | null;
    waitMs: number | null;
    until: string | null;
    inForce: boolean;
    message: string | null;
  } | null;
  /** The quota wall of the latest finished run. */
  resumeAfter: { runId: number; at: string; inForce: boolean } | null;
}

export interface StatusReport {
  database: string;
  generatedAt: string;
  workspace: { id: string; name: string; checkedAt: string } | null;
  /** `alive`: false when its process is gone (set by `status`, which can check). */
  running: { id: number; mode: string; startedAt: string; pid: number | null; alive?: boolean } | null;
  lastSuccess: { id: number; mode: string; finishedAt: string } | null;
  lastFullSuccess: { id: number; finishedAt: string } | null;
  runs: RunSummary[];
  quota: QuotaState;
  notClean: { pairs: number; skus: number; shown: NotCleanItem[] };
}

interface RunRow {
  id: number;
  mode: string;
  started_at: string;
  finished_at: string | null;
  status: string;
  walk_id: number | null;
  pid: number | null;
  skus_listed: number;
  skus_planned: number;
  skus_fetched: number;
  skus_failed: number;
  skus_deleted: number;
  locations_seen: number;
  history_rows_added: number;
  requests: number;
  requests_by_endpoint: string;
  responses_429: number;
  responses_503: number;
  retries: number;
  wait_ms: number;
  resume_after: string | null;
  error: string | null;
}

function parseJsonObject(s: string | null): Record<string, number> {
  try {
    const v = JSON.parse(s ?? "{}") as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, number>) : {};
  } catch {
    return {};
  }
}

function summarizeRun(r: RunRow, now: number): RunSummary {
  const end = r.finished_at ? Date.parse(r.finished_at) : r.status === "running" ? now : null;
  return {
    id: r.id,
    mode: r.mode,
    status: r.status,
    startedAt: r.started_at,
    finishedAt: r.finished_at,
    durationMs: end === null ? null : Math.max(0, end - Date.parse(r.started_at)),
    walkId: r.walk_id,
    pid: r.pid,
    counters: {
      skusListed: r.skus_listed,
      skusPlanned: r.skus_planned,
      skusFetched: r.skus_fetched,
      skusFailed: r.skus_failed,
      skusDeleted: r.skus_deleted,
      locationsSeen: r.locations_seen,
      historyRowsAdded: r.history_rows_added,
      requests: r.requests,
      requestsByEndpoint: parseJsonObject(r.requests_by_endpoint),
      responses429: r.responses_429,
      responses503: r.responses_503,
      retries: r.retries,
      waitMs: r.wait_ms,
    },
    resumeAfter: r.resume_after,
    error: r.error,
  };
}

/**
 * Everything `status` shows, from the database alone, in one read transaction (a
 * consistent snapshot while the daemon writes).
 */
export function readStatus(db: DB, opts: { database: string; runs: number; notCleanLimit: number; now?: number }): StatusReport {
  const now = opts.now ?? Date.now();
  return db.transaction((): StatusReport => {
    const ws = hasTable(db, "workspace")
      ? (db.prepare("SELECT id, name, checked_at AS checkedAt FROM workspace LIMIT 1").get() as StatusReport["workspace"] | undefined) ?? null
      : null;
    const rows = db.prepare("SELECT * FROM sync_runs ORDER BY id DESC LIMIT ?").all(opts.runs) as RunRow[];
    const running = db.prepare("SELECT id, mode, started_at AS startedAt, pid FROM sync_runs WHERE status = 'running' ORDER BY id DESC LIMIT 1").get() as
      | StatusReport["running"]
      | undefined;
    const lastSuccess = db
      .prepare("SELECT id, mode, finished_at AS finishedAt FROM sync_runs WHERE status = 'succeeded' ORDER BY finished_at DESC, id DESC LIMIT 1")
      .get() as StatusReport["lastSuccess"] | undefined;
    const lastFull = db
      .prepare("SELECT id, finished_at AS finishedAt FROM sync_runs WHERE status = 'succeeded' AND mode = 'full' ORDER BY finished_at DESC, id DESC LIMIT 1")
      .get() as StatusReport["lastFullSuccess"] | undefined;

    // Quota: the latest backoff of the latest run, and the quota wall of the latest finished run.
    const latest = db.prepare("SELECT id, status FROM sync_runs ORDER BY id DESC LIMIT 1").get() as { id: number; status: string } | undefined;
    let lastBackoff: QuotaState["lastBackoff"] = null;
    if (latest) {
      const b = db
        .prepare("SELECT at, endpoint, status, retry_after, wait_ms, message FROM sync_journal WHERE run_id = ? AND kind = 'backoff' ORDER BY id DESC LIMIT 1")
        .get(latest.id) as { at: string; endpoint: string | null; status: number | null; retry_after: string | null; wait_ms: number | null; message: string | null } | undefined;
      if (b) {
        const until = b.wait_ms == null ? null : Date.parse(b.at) + b.wait_ms;
        lastBackoff = {
          runId: latest.id,
          at: b.at,
          endpoint: b.endpoint,
          status: b.status,
          retryAfter: b.retry_after,
          waitMs: b.wait_ms,
          until: until === null ? null : new Date(until).toISOString(),
          inForce: latest.status === "running" && until !== null && until > now,
          message: b.message,
        };
      }
    }
    const finished = db.prepare("SELECT id, resume_after FROM sync_runs WHERE status <> 'running' ORDER BY id DESC LIMIT 1").get() as
      | { id: number; resume_after: string | null }
      | undefined;
    const resumeAfter = finished?.resume_after
      ? { runId: finished.id, at: finished.resume_after, inForce: Date.parse(finished.resume_after) > now }
      : null;
    const state: QuotaState["state"] = lastBackoff?.inForce ? "paused" : resumeAfter?.inForce ? "waiting" : "clear";

    const hasQty = hasTable(db, "sku_location_quantities");
    const counts = hasQty ? countNotClean(db) : { pairs: 0, skus: 0 };
    return {
      database: opts.database,
      generatedAt: new Date(now).toISOString(),
      workspace: ws,
      running: running ?? null,
      lastSuccess: lastSuccess ?? null,
      lastFullSuccess: lastFull ?? null,
      runs: rows.map((r) => summarizeRun(r, now)),
      quota: { state, lastBackoff, resumeAfter },
      notClean: { ...counts, shown: hasQty ? listNotClean(db, opts.notCleanLimit) : [] },
    };
  })();
}
