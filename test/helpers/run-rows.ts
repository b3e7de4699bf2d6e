/** A row of sync_runs written straight into a mirror, for tests of what reads run state (status, the daemon's state). */
import type { DB } from "../../src/store/db.js";

export interface RunRow {
  mode?: string;
  status: string;
  started: string;
  finished?: string | null;
  pid?: number;
  resumeAfter?: string | null;
  requests?: number;
  byEndpoint?: object;
  error?: string | null;
}

/** Inserts the run (30 listed, 3 fetched, 2 × 429, 1.5 s waited) and returns its id. */
export function insertRun(db: DB, r: RunRow): number {
  const info = db
    .prepare(
      `INSERT INTO sync_runs (mode, started_at, finished_at, status, pid, skus_listed, skus_fetched, requests, requests_by_endpoint, responses_429, wait_ms, resume_after, error)
       VALUES (?, ?, ?, ?, ?, 30, 3, ?, ?, 2, 1500, ?, ?)`,
    )
    .run(r.mode ?? "incremental", r.started, r.finished ?? null, r.status, r.pid ?? 1, r.requests ?? 9, JSON.stringify(r.byEndpoint ?? { list: 1 }), r.resumeAfter ?? null, r.error ?? null);
  return Number(info.lastInsertRowid);
}
