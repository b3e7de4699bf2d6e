/**
 * Runs: the workspace a file belongs to, the sync_runs row of each run (start, resume,
 * counters, plan, outcome), its journal (sync_journal) and the quota wall a run leaves.
 *
 * The journal has one writer path: `RunWriter.journal`, on the writer connection of the
 * run in hand. Entries from outside the run (the daemon's skipped ticks) reach it through
 * `journalInRunInHand`, so they join whatever transaction that connection has open instead
 * of waiting on it from a second connection.
 */
import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { WorkspaceResponse } from "../core/api-schemas.js";
import { DEFAULTS } from "../core/defaults.js";
import { StoreError, WorkspaceMismatchError } from "../core/errors.js";
import { redactSecrets } from "../core/secret.js";
import type { DB } from "./db.js";

export type RunMode = "full" | "incremental";
export type RunStatus = "running" | "succeeded" | "partial" | "failed" | "interrupted";

export interface RunState {
  id: number;
  mode: RunMode;
  walkId: number;
  /** Cursor of the next list page to fetch; null = start from the first page. */
  listCursor: string | null;
  listDone: boolean;
  /** The walk's count moved under it and the list is to be walked once more (sync/list-walk.ts); a resumed run inherits it. */
  listWalkAgain: boolean;
  resumedFrom: number | null;
}

/** The request counters of a run (sync_runs.requests, requests_by_endpoint, ..., responses_429, ...). */
export interface RunCounters {
  requests: number;
  requestsByEndpoint: Record<string, number>;
  /** Attempts by HTTP status ("2xx" for successes) or error kind (network, timeout, invalid-response). */
  requestsByStatus: Record<string, number>;
  responses429: number;
  responses503: number;
  retries: number;
  waitMs: number;
}

/** Why SKUs were queued in a run (sync_runs.skus_new, ...) and its request budget. */
export interface RunPlan {
  new: number;
  changed: number;
  repolled: number;
  retried: number;
  reverified: number;
  budget: number | null;
}

export interface JournalEntry {
  kind: string;
  /** When it happened (ISO 8601); default: when it is written. */
  at?: string;
  endpoint?: string | null;
  status?: number | null;
  retryAfter?: string | null;
  waitMs?: number | null;
  skuId?: string | null;
  locationId?: string | null;
  message?: string | null;
}

/** A quota wall: the run that stopped at it, and the time before which no run should start. */
export interface QuotaWall {
  runId: number;
  at: string;
}

const iso = () => new Date().toISOString();

/** The latest finished run's wall: a later run that finished (--ignore-quota-wall, or after the wall) clears it. */
const LATEST_QUOTA_WALL = "SELECT id AS runId, resume_after AS at FROM sync_runs WHERE status <> 'running' ORDER BY id DESC LIMIT 1";

/** The one reading of the quota wall (sync's start, `status`, the daemon): null when the latest finished run left none. */
export function latestQuotaWall(db: DB): QuotaWall | null {
  const row = db.prepare(LATEST_QUOTA_WALL).get() as { runId: number; at: string | null } | undefined;
  return row?.at ? { runId: row.runId, at: row.at } : null;
}

/**
 * The quota a run learned against a server (migration 0006): the rate proven within it and what
 * bounds it, for the next run to start from (the scheduler's LearnedQuota, by shape).
 */
export interface KeptQuota {
  low: number;
  high: number | null;
  burstLow: number;
  burstHigh: number | null;
  oneToken: boolean;
}

/** ...and which run learned it, when. */
export interface KeptQuotaRow {
  quota: KeptQuota;
  runId: number;
  learnedAt: string;
}

const LEARNED_QUOTA = `SELECT low, high, burst_low AS burstLow, burst_high AS burstHigh, one_token AS oneToken, run_id AS runId, learned_at AS learnedAt
  FROM learned_quota WHERE server = ?`;

/** A kept quota learned at `learnedAt` is what the next run starts from at `now` (DEFAULTS.learnedQuotaMaxAgeMs): sync's peek and `status` ask the same. */
export function learnedQuotaUsable(learnedAt: string, now: number): boolean {
  const age = now - Date.parse(learnedAt);
  return age >= 0 && age < DEFAULTS.learnedQuotaMaxAgeMs;
}

/** The quota kept for `server`, if still usable at `now`. */
function keptQuota(db: DB, server: string, now: number): KeptQuotaRow | null {
  const r = db.prepare(LEARNED_QUOTA).get(server) as (Omit<KeptQuota, "oneToken"> & { oneToken: number; runId: number; learnedAt: string }) | undefined;
  if (!r || !learnedQuotaUsable(r.learnedAt, now)) return null;
  const { runId, learnedAt, oneToken, ...bounds } = r;
  return { quota: { ...bounds, oneToken: oneToken === 1 }, runId, learnedAt };
}

/**
 * What an existing database says, read without writing anything: the workspace it
 * belongs to, a quota wall (resume_after) still in force, and the quota the last run against
 * `server` learned (if recent: DEFAULTS.learnedQuotaMaxAgeMs). Null when new or empty.
 */
export function peekDatabase(
  path: string,
  now = Date.now(),
  server: string | null = null,
): { workspace: { id: string; name: string } | null; resumeAfter: number | null; learnedQuota: KeptQuotaRow | null } | null {
  if (!existsSync(path)) return null;
  let db: DB | undefined;
  try {
    // Read-write handle in query_only mode rather than readonly: a readonly connection
    // cannot remove the -wal/-shm files it makes appear, and a refused run writes nothing.
    db = new Database(path, { fileMustExist: true });
    db.pragma("query_only = ON");
    const has = (t: string) => db!.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(t);
    if (!has("workspace")) return null;
    const workspace = (db.prepare("SELECT id, name FROM workspace LIMIT 1").get() as { id: string; name: string } | undefined) ?? null;
    const wall = has("sync_runs") ? latestQuotaWall(db) : null;
    const t = wall ? Date.parse(wall.at) : NaN;
    const learnedQuota = server !== null && has("learned_quota") ? keptQuota(db, server, now) : null;
    return { workspace, resumeAfter: Number.isFinite(t) && t > now ? t : null, learnedQuota };
  } catch (err) {
    throw new StoreError(`cannot read database ${path}: ${(err as Error).message}. Is it an inventory-mirror database?`, { cause: err });
  } finally {
    db?.close();
  }
}

export function databaseBelongsToAnother(db: { id: string; name: string }, api: { id: string; name: string }): WorkspaceMismatchError {
  return new WorkspaceMismatchError(
    `this database belongs to workspace ${db.id} ("${db.name}"), but the key is connected to workspace ${api.id} ("${api.name}"). ` + `Use another --db for that workspace; nothing was written.`,
  );
}

// ---- the run in hand of each writer of this process ------------------------------------------------

/** Writers of this process with a run in hand, by database file: each appends to its run's journal. */
const runsInHand = new Map<string, (entries: JournalEntry[]) => boolean>();

/**
 * Append entries to the journal of the run this process has in hand on `dbPath`, through
 * that run's own connection. False (nothing written) when no run of this process is in hand
 * there: it has not created its row yet, or it has ended.
 */
export function journalInRunInHand(dbPath: string, entries: JournalEntry[]): boolean {
  const append = runsInHand.get(resolve(dbPath));
  return append ? append(entries) : false;
}

// ---- the writer ------------------------------------------------------------------------------------

type ResumableRow = { id: number; mode: RunMode; status: RunStatus; walk_id: number; list_cursor: string | null; list_done: number; list_walk_again: number };

/** Runs, journal, counters and workspace, on the writer connection. */
export class RunWriter {
  private readonly s;
  private readonly file: string;

  constructor(private readonly db: DB) {
    this.file = resolve(db.name);
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      getWorkspace: p("SELECT id, name FROM workspace LIMIT 1"),
      insertWorkspace: p("INSERT INTO workspace (id, name, scope, checked_at) VALUES (?, ?, ?, ?)"),
      touchWorkspace: p("UPDATE workspace SET name = ?, scope = ?, checked_at = ? WHERE id = ?"),
      lastRun: p("SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1"),
      markInterrupted: p(`UPDATE sync_runs SET status = 'interrupted', finished_at = COALESCE(finished_at, ?),
          error = COALESCE(error, 'the process ended without finishing the run (killed or crashed)') WHERE status = 'running'`),
      insertRun: p(`INSERT INTO sync_runs (mode, started_at, status, walk_id, pid, list_cursor, list_done, list_walk_again)
        VALUES (?, ?, 'running', ?, ?, ?, ?, ?)`),
      setWalk: p("UPDATE sync_runs SET walk_id = id WHERE id = ?"),
      carryCounters: p(`UPDATE sync_runs SET skus_listed = (SELECT skus_listed FROM sync_runs WHERE id = ?) WHERE id = ?`),
      runStats: p(`UPDATE sync_runs SET requests = @requests, requests_by_endpoint = @byEndpoint, requests_by_status = @byStatus, responses_429 = @responses429,
          responses_503 = @responses503, retries = @retries, wait_ms = @waitMs WHERE id = @id`),
      runPlan: p(`UPDATE sync_runs SET skus_new = @new, skus_changed = @changed, skus_repolled = @repolled,
          skus_retried = @retried, skus_reverified = @reverified, request_budget = @budget WHERE id = @id`),
      finishRun: p("UPDATE sync_runs SET status = ?, finished_at = ?, error = ?, resume_after = ? WHERE id = ?"),
      previousIncrementalStart: p("SELECT started_at FROM sync_runs WHERE mode = 'incremental' AND id < ? ORDER BY id DESC LIMIT 1"),
      keepQuota: p(`INSERT INTO learned_quota (server, low, high, burst_low, burst_high, one_token, run_id, learned_at)
        VALUES (@server, @low, @high, @burstLow, @burstHigh, @oneToken, @runId, @at)
        ON CONFLICT (server) DO UPDATE SET low = excluded.low, high = excluded.high, burst_low = excluded.burst_low,
          burst_high = excluded.burst_high, one_token = excluded.one_token, run_id = excluded.run_id, learned_at = excluded.learned_at`),
      forgetQuota: p("DELETE FROM learned_quota WHERE server = ?"),
      journal: p(`INSERT INTO sync_journal (run_id, at, kind, endpoint, status, retry_after, wait_ms, sku_id, location_id, message)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    };
  }

  /** Record the workspace; refuse (exit 4, nothing written) if the file belongs to another one. */
  bindWorkspace(ws: WorkspaceResponse): void {
    this.db.transaction(() => {
      const cur = this.s.getWorkspace.get() as { id: string; name: string } | undefined;
      if (cur && cur.id !== ws.workspace.id) throw databaseBelongsToAnother(cur, ws.workspace);
      if (cur) this.s.touchWorkspace.run(ws.workspace.name, ws.scope, iso(), cur.id);
      else this.s.insertWorkspace.run(ws.workspace.id, ws.workspace.name, ws.scope, iso());
    })();
  }

  /**
   * Start a run. A run left 'running' by a killed process is marked 'interrupted' first.
   * A full run resumes the walk of the last full run when that walk did not finish:
   * same walk id, its list cursor, its queue of SKUs still to fetch.
   */
  startRun(mode: RunMode): RunState {
    const run = this.db.transaction((): RunState => {
      this.s.markInterrupted.run(iso());
      // Only the latest run of all is resumed: once another walk has run since, the old cursor and
      // queue describe a past state of the server. Either kind of run resumes an unfinished full
      // walk (as a full run: it finishes the backfill); a full run does not resume an incremental
      // walk, it starts the complete one it was asked for.
      const prev = this.s.lastRun.get() as ResumableRow | undefined;
      const resumable = prev && (prev.mode === mode || prev.mode === "full") && prev.status !== "succeeded" && prev.walk_id != null;
      return resumable ? this.resumeRun(prev, mode) : this.newRun(mode);
    })();
    this.holdRun(run.id);
    return run;
  }

  private resumeRun(prev: ResumableRow, asked: RunMode): RunState {
    const mode = prev.mode;
    const info = this.s.insertRun.run(mode, iso(), prev.walk_id, process.pid, prev.list_cursor, prev.list_done, prev.list_walk_again);
    const id = Number(info.lastInsertRowid);
    this.s.carryCounters.run(prev.id, id);
    const note = mode === asked ? "" : `; asked for an ${asked} run, this one finishes the unfinished ${mode} walk first`;
    this.journal(id, { kind: "resume", message: `resuming the walk of run ${prev.walk_id} (previous run ${prev.id} ended ${prev.status})${note}` });
    return { id, mode, walkId: prev.walk_id, listCursor: prev.list_cursor, listDone: prev.list_done === 1, listWalkAgain: prev.list_walk_again === 1, resumedFrom: prev.id };
  }

  private newRun(mode: RunMode): RunState {
    const info = this.s.insertRun.run(mode, iso(), null, process.pid, null, 0, 0);
    const id = Number(info.lastInsertRowid);
    this.s.setWalk.run(id);
    return { id, mode, walkId: id, listCursor: null, listDone: false, listWalkAgain: false, resumedFrom: null };
  }

  /** From now until `close`, entries for the run in hand on this file (journalInRunInHand) go to run `runId`. */
  private holdRun(runId: number): void {
    runsInHand.set(this.file, (entries) => {
      if (!this.db.open) return false;
      for (const e of entries) this.journal(runId, e);
      return true;
    });
  }

  /** The connection is closing: no run in hand any more. */
  release(): void {
    runsInHand.delete(this.file);
  }

  saveRunCounters(runId: number, c: RunCounters): void {
    this.s.runStats.run({
      id: runId,
      requests: c.requests,
      byEndpoint: JSON.stringify(c.requestsByEndpoint),
      byStatus: JSON.stringify(c.requestsByStatus),
      responses429: c.responses429,
      responses503: c.responses503,
      retries: c.retries,
      waitMs: Math.round(c.waitMs),
    });
  }

  saveRunPlan(runId: number, p: RunPlan): void {
    this.s.runPlan.run({ id: runId, ...p });
  }

  finishRun(runId: number, status: RunStatus, error: string | null = null, resumeAfter: string | null = null): void {
    // Text that came from elsewhere (server bodies, errors) is redacted before it is stored.
    this.s.finishRun.run(status, iso(), error === null ? null : redactSecrets(error), resumeAfter, runId);
  }

  /** Keep what run `runId` learned of `server`'s quota for the next run (replacing what an earlier run kept). */
  keepLearnedQuota(server: string, runId: number, q: KeptQuota): void {
    this.s.keepQuota.run({ server, runId, at: iso(), low: q.low, high: q.high, burstLow: q.burstLow, burstHigh: q.burstHigh, oneToken: q.oneToken ? 1 : 0 });
  }

  /** What was kept of `server`'s quota no longer holds (a run's 429s proved no steady rate). */
  forgetLearnedQuota(server: string): void {
    this.s.forgetQuota.run(server);
  }

  /** Epoch ms at which the incremental run before `runId` started, or null when there was none. */
  previousIncrementalStart(runId: number): number | null {
    const prev = this.s.previousIncrementalStart.get(runId) as { started_at: string } | undefined;
    return prev ? Date.parse(prev.started_at) : null;
  }

  journal(runId: number, e: JournalEntry): void {
    this.s.journal.run(
      runId,
      e.at ?? iso(),
      e.kind,
      e.endpoint ?? null,
      e.status ?? null,
      e.retryAfter ?? null,
      e.waitMs == null ? null : Math.round(e.waitMs),
      e.skuId ?? null,
      e.locationId ?? null,
      e.message == null ? null : redactSecrets(e.message),
    );
  }
}
