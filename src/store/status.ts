/**
 * The status read model: what `inventory-mirror status`, the daemon's /readyz and its
 * /metrics read from the mirror outside a sync run.
 *
 * Every read uses its own short-lived read-only connection (db.ts openReadOnly): the
 * database is in WAL mode, so readers never block the writer and never see half a unit
 * of work.
 */
import { existsSync } from "node:fs";
import { CLEAN_FRESHNESS } from "../core/api-schemas.js";
import { ConfigError } from "../core/errors.js";
import { hasTable, openMirrorReader, openReadOnly, type DB } from "./db.js";
import { latestQuotaWall, learnedQuotaUsable } from "./runs.js";
import { feedBounds } from "./outbox.js";

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
  /** What runs learned of each server's quota (learned_quota): the next run against it starts at `low` while `usable`. */
  learned: Array<{ server: string; low: number; high: number | null; runId: number; learnedAt: string; usable: boolean }>;
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
  /** The change feed: its latest and oldest kept seq, and its registered consumers (the PostgreSQL publishers); null without a feed. */
  feed: { latest: number; oldest: number | null; consumers: Array<{ name: string; confirmedSeq: number; confirmedAt: string | null; behind: number }> } | null;
}

function readFeed(db: DB): StatusReport["feed"] {
  if (!hasTable(db, "changes") || !hasTable(db, "feed_consumers")) return null;
  const { latest, oldest } = feedBounds(db);
  const rows = db.prepare("SELECT name, confirmed_seq AS confirmedSeq, confirmed_at AS confirmedAt FROM feed_consumers ORDER BY name").all() as Array<{
    name: string;
    confirmedSeq: number;
    confirmedAt: string | null;
  }>;
  return { latest, oldest, consumers: rows.map((c) => ({ ...c, behind: Math.max(0, latest - c.confirmedSeq) })) };
}

// ---- queries -----------------------------------------------------------------------------------------

/** Epoch ms at which the last successful run (any mode) finished, or null. */
function lastSuccessAt(db: DB): number | null {
  const row = db.prepare("SELECT max(finished_at) AS at FROM sync_runs WHERE status = 'succeeded'").get() as { at: string | null };
  return row.at ? Date.parse(row.at) : null;
}

/** Current SKU × location pairs whose freshness is not clean (the latest scan may not be reflected). */
const NOT_CLEAN_FROM = `
  FROM sku_location_quantities q
  JOIN skus s ON s.id = q.sku_id AND s.deleted_at IS NULL
  LEFT JOIN locations l ON l.id = q.location_id
  WHERE l.deleted_at IS NULL AND q.freshness_status IS NOT '${CLEAN_FRESHNESS}'`;

function countNotClean(db: DB): { pairs: number; skus: number } {
  return db.prepare(`SELECT count(*) AS pairs, count(DISTINCT q.sku_id) AS skus ${NOT_CLEAN_FROM}`).get() as { pairs: number; skus: number };
}

/** The longest-standing first. */
function listNotClean(db: DB, limit: number): NotCleanItem[] {
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

// ---- the daemon's reads ------------------------------------------------------------------------------

/** A read-only connection, or null when the file does not exist or is not a mirror database yet. */
function openStateReader(dbPath: string): DB | null {
  if (!existsSync(dbPath)) return null;
  const db = openReadOnly(dbPath);
  if (!hasTable(db, "sync_runs")) {
    db.close();
    return null;
  }
  return db;
}

function withStateReader<T>(dbPath: string, fallback: T, f: (db: DB) => T): T {
  const db = openStateReader(dbPath);
  if (!db) return fallback;
  try {
    return f(db);
  } finally {
    db.close();
  }
}

/** What the daemon reads between runs, each answer from one short read; null (or {}) without a mirror yet. */
export interface MirrorState {
  /** Epoch ms of the last successful run's end. */
  lastSuccessAt(): number | null;
  /** Epoch ms of the latest finished run's quota wall (in force or not). */
  quotaWallAt(): number | null;
  /** Current SKUs with at least one location whose freshness is not clean. */
  skusNotClean(): number | null;
  /** A finished run's responses by endpoint and status (responsesByEndpointStatus). */
  responses(runId: number, requestsByEndpoint: Record<string, number>): Record<string, Record<string, number>>;
  /** The change feed's latest seq (null without a feed). */
  feedLatest(): number | null;
}

export function mirrorState(dbPath: string): MirrorState {
  return {
    lastSuccessAt: () => withStateReader(dbPath, null, lastSuccessAt),
    quotaWallAt: () =>
      withStateReader(dbPath, null, (db) => {
        const wall = latestQuotaWall(db);
        return wall ? Date.parse(wall.at) : null;
      }),
    skusNotClean: () => withStateReader(dbPath, null, (db) => countNotClean(db).skus),
    responses: (runId, byEndpoint) => withStateReader(dbPath, {}, (db) => responsesByEndpointStatus(db, runId, byEndpoint)),
    feedLatest: () => withStateReader(dbPath, null, (db) => (hasTable(db, "changes") ? feedBounds(db).latest : null)),
  };
}

// ---- `inventory-mirror status` -------------------------------------------------------------------------

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

type BackoffRow = { at: string; endpoint: string | null; status: number | null; retry_after: string | null; wait_ms: number | null; message: string | null };

/** Quota: the latest backoff of the latest run, and the quota wall of the latest finished run. */
function readQuota(db: DB, now: number): QuotaState {
  const latest = db.prepare("SELECT id, status FROM sync_runs ORDER BY id DESC LIMIT 1").get() as { id: number; status: string } | undefined;
  let lastBackoff: QuotaState["lastBackoff"] = null;
  const b = latest
    ? (db.prepare("SELECT at, endpoint, status, retry_after, wait_ms, message FROM sync_journal WHERE run_id = ? AND kind = 'backoff' ORDER BY id DESC LIMIT 1").get(latest.id) as
        | BackoffRow
        | undefined)
    : undefined;
  if (latest && b) {
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
  const wall = latestQuotaWall(db);
  const resumeAfter = wall ? { runId: wall.runId, at: wall.at, inForce: Date.parse(wall.at) > now } : null;
  const state: QuotaState["state"] = lastBackoff?.inForce ? "paused" : resumeAfter?.inForce ? "waiting" : "clear";
  return { state, lastBackoff, resumeAfter, learned: readLearned(db, now) };
}

/** The quotas runs learned (a database before migration 0006 has none). */
function readLearned(db: DB, now: number): QuotaState["learned"] {
  if (!hasTable(db, "learned_quota")) return [];
  const rows = db.prepare("SELECT server, low, high, run_id AS runId, learned_at AS learnedAt FROM learned_quota ORDER BY learned_at DESC").all() as Array<
    Omit<QuotaState["learned"][number], "usable">
  >;
  return rows.map((r) => ({ ...r, usable: learnedQuotaUsable(r.learnedAt, now) }));
}

/** The workspace, the run in progress, the last successes and the last `runs` runs. */
function readRuns(db: DB, runs: number, now: number): Pick<StatusReport, "workspace" | "running" | "lastSuccess" | "lastFullSuccess" | "runs"> {
  const workspace = hasTable(db, "workspace") ? ((db.prepare("SELECT id, name, checked_at AS checkedAt FROM workspace LIMIT 1").get() as StatusReport["workspace"] | undefined) ?? null) : null;
  const rows = db.prepare("SELECT * FROM sync_runs ORDER BY id DESC LIMIT ?").all(runs) as RunRow[];
  const running = db.prepare("SELECT id, mode, started_at AS startedAt, pid FROM sync_runs WHERE status = 'running' ORDER BY id DESC LIMIT 1").get() as StatusReport["running"] | undefined;
  const lastSuccess = db.prepare("SELECT id, mode, finished_at AS finishedAt FROM sync_runs WHERE status = 'succeeded' ORDER BY finished_at DESC, id DESC LIMIT 1").get() as
    | StatusReport["lastSuccess"]
    | undefined;
  const lastFull = db.prepare("SELECT id, finished_at AS finishedAt FROM sync_runs WHERE status = 'succeeded' AND mode = 'full' ORDER BY finished_at DESC, id DESC LIMIT 1").get() as
    | StatusReport["lastFullSuccess"]
    | undefined;
  return {
    workspace,
    running: running ?? null,
    lastSuccess: lastSuccess ?? null,
    lastFullSuccess: lastFull ?? null,
    runs: rows.map((r) => summarizeRun(r, now)),
  };
}

/**
 * Everything `status` shows, from the database alone, in one read transaction (a
 * consistent snapshot while the daemon writes).
 */
export function readStatus(db: DB, opts: { database: string; runs: number; notCleanLimit: number; now?: number }): StatusReport {
  const now = opts.now ?? Date.now();
  return db.transaction((): StatusReport => {
    const hasQty = hasTable(db, "sku_location_quantities");
    const counts = hasQty ? countNotClean(db) : { pairs: 0, skus: 0 };
    return {
      database: opts.database,
      generatedAt: new Date(now).toISOString(),
      ...readRuns(db, opts.runs, now),
      quota: readQuota(db, now),
      notClean: { ...counts, shown: hasQty ? listNotClean(db, opts.notCleanLimit) : [] },
      feed: readFeed(db),
    };
  })();
}

/** `status` on a file: opened read-only (refused when missing or not a mirror), read, closed. */
export function readStatusOf(dbPath: string, opts: { runs: number; notCleanLimit: number }): StatusReport {
  const db = openMirrorReader(dbPath);
  try {
    if (!hasTable(db, "sync_runs")) {
      throw new ConfigError(`${dbPath} is not an inventory-mirror database (no sync_runs table); run 'inventory-mirror sync --full' first or pass --db`);
    }
    return readStatus(db, { database: dbPath, ...opts });
  } finally {
    db.close();
  }
}
