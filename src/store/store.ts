/**
 * The saver: consumes validated records and writes them, one transaction per unit
 * of work (the locations tree, a list page, a SKU's detail + whole history), with
 * the checkpoint that describes the unit in the same transaction. A crash between
 * two units loses at most the unit in hand, and state and data never disagree.
 */
import * as cryptoModule from "node:crypto";
import { createHash } from "node:crypto";
import type { DetailResponse, HistoryRow, ListItem, LocationNode, WorkspaceResponse } from "../core/api-schemas.js";
import { scanNotReflected } from "../core/api-schemas.js";
import { WorkspaceMismatchError } from "../core/errors.js";
import { redactSecrets } from "../core/secret.js";
import type { DB } from "./db.js";
import type { Planner, PlanReason, PreviousState } from "../sync/planner.js";
import type { ReplayableRow } from "../sync/history-check.js";

export type RunMode = "full" | "incremental";
export type RunStatus = "running" | "succeeded" | "partial" | "failed" | "interrupted";

export interface RunState {
  id: number;
  mode: RunMode;
  walkId: number;
  /** Cursor of the next list page to fetch; null = start from the first page. */
  listCursor: string | null;
  listDone: boolean;
  resumedFrom: number | null;
}

export interface RunCounters {
  requests: number;
  requestsByEndpoint: Record<string, number>;
  requestsByStatus: Record<string, number>;
  responses429: number;
  responses503: number;
  retries: number;
  waitMs: number;
}

export interface JournalEntry {
  kind: string;
  endpoint?: string | null;
  status?: number | null;
  retryAfter?: string | null;
  waitMs?: number | null;
  skuId?: string | null;
  locationId?: string | null;
  message?: string | null;
}

const iso = () => new Date().toISOString();
const bool = (b: boolean | null) => (b === null ? null : b ? 1 : 0);
const json = (v: unknown) => (v === null || v === undefined ? null : JSON.stringify(v));

/**
 * The hash of a history row's content: every field, in a fixed order. Rows equal in every
 * field share it; the copy's ordinal (dup_index, historyCopies) tells them apart.
 */
export function historyRowKey(r: HistoryRow): string {
  return sha1Hex(
    JSON.stringify([
      r.kind, r.occurredAt, r.direction, r.quantity, r.locationId, r.locationName, r.locationCode,
      r.eventId, r.eventTypeCode, r.eventTypeName, r.setSessionId, r.setTypeCode, r.observedQuantity, r.note,
    ]),
  );
}

/** A history row's identity in the store: its content hash and which copy of that content it is. */
export interface HistoryCopyKey {
  rowKey: string;
  /** 0 for the first row (in the order given) with this content, 1 for the second identical one, ... */
  dupIndex: number;
}

/**
 * The identity of each row of a fetch, in the server's order: identical rows are copies
 * 0, 1, 2... A fetch that sees the same copies again maps them to the same identities, so
 * storing it again adds nothing; one that sees one more copy than is stored adds that one.
 * Identical rows share occurredAt, so all copies of a row sit in one run of ties: a newest
 * first walk that went past that occurredAt has seen every copy the server holds.
 */
export function historyCopies(rows: readonly HistoryRow[]): HistoryCopyKey[] {
  const seen = new Map<string, number>();
  return rows.map((r) => {
    const rowKey = historyRowKey(r);
    const dupIndex = seen.get(rowKey) ?? 0;
    seen.set(rowKey, dupIndex + 1);
    return { rowKey, dupIndex };
  });
}

/** One string per stored identity (sets of identities). */
export const copyId = (k: HistoryCopyKey): string => `${k.rowKey}#${k.dupIndex}`;

/** sha1 of a string as hex: crypto.hash (one call, no Hash object) where Node has it (>= 20.12). */
const oneShot = (cryptoModule as { hash?: (alg: string, data: string, enc: "hex") => string }).hash;
const sha1Hex: (s: string) => string = oneShot
  ? (s) => oneShot("sha1", s, "hex")
  : (s) => createHash("sha1").update(s).digest("hex");

/** What the list shows of a SKU, hashed: a change here means detail/history must be refetched. */
export function listFingerprint(item: ListItem): string {
  const sorted = (o: Record<string, unknown>) => Object.keys(o).sort().map((k) => [k, o[k]]);
  return sha1Hex(
    JSON.stringify([
      item.code, item.skuCode, item.name, item.barcode, item.unit,
      item.product.id, item.product.name, item.product.brand,
      sorted(item.options), item.totalQuantity, sorted(item.locationQuantities),
    ]),
  );
}

interface GroupWaiter {
  resolve: () => void;
  reject: (err: unknown) => void;
}

/** The history table's secondary indexes, exactly as the migrations create them (sqlite_master.sql). */
const HISTORY_INDEXES: Record<string, string> = {
  history_sku_time: "CREATE INDEX history_sku_time ON history(sku_id, occurred_at)",
  history_location_time: "CREATE INDEX history_location_time ON history(location_id, occurred_at)",
  history_sku_location_time: "CREATE INDEX history_sku_location_time ON history(sku_id, location_id, occurred_at)",
  history_time: "CREATE INDEX history_time ON history(occurred_at)",
};

export class Store {
  private readonly s;

  constructor(readonly db: DB) {
    const p = (sql: string) => db.prepare(sql);
    this.s = {
      getWorkspace: p("SELECT id, name FROM workspace LIMIT 1"),
      insertWorkspace: p("INSERT INTO workspace (id, name, scope, checked_at) VALUES (?, ?, ?, ?)"),
      touchWorkspace: p("UPDATE workspace SET name = ?, scope = ?, checked_at = ? WHERE id = ?"),

      upsertLocation: p(`INSERT INTO locations (id, name, code, parent_id, parent_name, node_kind, depth, path_ids, path_names,
          display_path, is_leaf, child_count, selectable, status, updated_at, first_seen_at, last_seen_at, missed_walks, deleted_at)
        VALUES (@id, @name, @code, @parentId, @parentName, @nodeKind, @depth, @pathIds, @pathNames, @displayPath, @isLeaf,
          @childCount, @selectable, @status, @updatedAt, @now, @now, 0, NULL)
        ON CONFLICT(id) DO UPDATE SET name = excluded.name, code = excluded.code, parent_id = excluded.parent_id,
          parent_name = excluded.parent_name, node_kind = excluded.node_kind, depth = excluded.depth, path_ids = excluded.path_ids,
          path_names = excluded.path_names, display_path = excluded.display_path, is_leaf = excluded.is_leaf,
          child_count = excluded.child_count, selectable = excluded.selectable, status = excluded.status,
          updated_at = excluded.updated_at, last_seen_at = excluded.last_seen_at, missed_walks = 0, deleted_at = NULL`),
      missLocations: p(`UPDATE locations SET missed_walks = missed_walks + 1 WHERE last_seen_at < ? AND deleted_at IS NULL`),
      deleteMissedLocations: p(`UPDATE locations SET deleted_at = ? WHERE deleted_at IS NULL AND missed_walks >= ?`),

      upsertSku: p(`INSERT INTO skus (id, code, sku_code, name, barcode, unit, product_id, product_name, product_brand, options,
          total_quantity, first_seen_at, last_seen_at, missed_walks, deleted_at)
        VALUES (@id, @code, @skuCode, @name, @barcode, @unit, @productId, @productName, @productBrand, @options,
          @totalQuantity, @now, @now, 0, NULL)
        ON CONFLICT(id) DO UPDATE SET code = excluded.code, sku_code = excluded.sku_code, name = excluded.name,
          barcode = excluded.barcode, unit = excluded.unit, product_id = excluded.product_id, product_name = excluded.product_name,
          product_brand = excluded.product_brand, options = excluded.options, total_quantity = excluded.total_quantity,
          last_seen_at = excluded.last_seen_at, missed_walks = 0, deleted_at = NULL`),
      deleteRootQty: p("DELETE FROM sku_root_quantities WHERE sku_id = ?"),
      insertRootQty: p("INSERT INTO sku_root_quantities (sku_id, root_location_id, quantity) VALUES (?, ?, ?)"),
      getSkuSync: p(`SELECT s.list_fingerprint, s.fetched_walk_id, s.pending_walk_id, s.fail_count,
          EXISTS (SELECT 1 FROM sku_location_quantities q WHERE q.sku_id = s.sku_id AND q.freshness_status IS NOT 'clean') AS not_clean
        FROM sku_sync s WHERE s.sku_id = ?`),
      upsertSkuSync: p(`INSERT INTO sku_sync (sku_id, list_fingerprint, listed_walk_id, pending_walk_id)
        VALUES (@skuId, @fingerprint, @walkId, @pending)
        ON CONFLICT(sku_id) DO UPDATE SET list_fingerprint = excluded.list_fingerprint, listed_walk_id = excluded.listed_walk_id,
          pending_walk_id = COALESCE(excluded.pending_walk_id, sku_sync.pending_walk_id)`),
      setListCheckpoint: p("UPDATE sync_runs SET list_cursor = ?, list_done = ?, skus_listed = skus_listed + ?, skus_planned = skus_planned + ? WHERE id = ?"),

      // Only when something differs: the list page usually wrote the same values moments ago, and
      // rewriting an unchanged row still rewrites its page and the entries of its three indexes.
      updateSkuFromDetail: p(`UPDATE skus SET code = @code, sku_code = @skuCode, name = @name, barcode = @barcode, unit = @unit,
          product_id = @productId, product_name = @productName, product_brand = @productBrand, options = @options,
          total_quantity = @totalQuantity, deleted_at = NULL
        WHERE id = @id AND (code IS NOT @code OR sku_code IS NOT @skuCode OR name IS NOT @name OR barcode IS NOT @barcode
          OR unit IS NOT @unit OR product_id IS NOT @productId OR product_name IS NOT @productName
          OR product_brand IS NOT @productBrand OR options IS NOT @options OR total_quantity IS NOT @totalQuantity
          OR deleted_at IS NOT NULL)`),
      getLocQty: p("SELECT location_id, not_clean_since FROM sku_location_quantities WHERE sku_id = ?"),
      deleteLocQty: p("DELETE FROM sku_location_quantities WHERE sku_id = ? AND location_id = ?"),
      upsertLocQty: p(`INSERT INTO sku_location_quantities (sku_id, location_id, quantity, freshness_status, freshness_last_replayed_at,
          freshness_last_source_kind, location_name, location_code, parent_id, fetched_at, not_clean_since)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(sku_id, location_id) DO UPDATE SET quantity = excluded.quantity, freshness_status = excluded.freshness_status,
          freshness_last_replayed_at = excluded.freshness_last_replayed_at, freshness_last_source_kind = excluded.freshness_last_source_kind,
          location_name = excluded.location_name, location_code = excluded.location_code, parent_id = excluded.parent_id,
          fetched_at = excluded.fetched_at, not_clean_since = excluded.not_clean_since`),
      // Positional parameters on the hot path: binding an object by name costs a lookup per column.
      insertHistory: p(`INSERT OR IGNORE INTO history (sku_id, row_key, dup_index, kind, occurred_at, direction, quantity, location_id,
          location_name, location_code, event_id, event_type_code, event_type_name, set_session_id, set_type_code,
          observed_quantity, note, first_seen_run_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
      skuFetched: p(`UPDATE sku_sync SET pending_walk_id = NULL, fetched_walk_id = ?, fetched_at = ?, fail_count = 0, last_error = NULL WHERE sku_id = ?`),
      // A re-poll that stored the detail only: done in this walk, but fetched_at (when detail and
      // history were last stored, which re-verification goes by) stays.
      skuDetailPolled: p(`UPDATE sku_sync SET pending_walk_id = NULL, fetched_walk_id = ?, fail_count = 0, last_error = NULL WHERE sku_id = ?`),
      storedLeaves: p(`SELECT location_id, quantity, freshness_status, freshness_last_replayed_at FROM sku_location_quantities WHERE sku_id = ?`),
      skuFailed: p(`UPDATE sku_sync SET fail_count = fail_count + 1, last_error = ? WHERE sku_id = ?`),
      skuVanished: p(`UPDATE sku_sync SET pending_walk_id = NULL WHERE sku_id = ?`),
      markSkuDeleted: p(`UPDATE skus SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`),
      runSkuDone: p("UPDATE sync_runs SET skus_fetched = skus_fetched + 1, history_rows_added = history_rows_added + ? WHERE id = ?"),
      runSkuFailed: p("UPDATE sync_runs SET skus_failed = skus_failed + 1 WHERE id = ?"),

      missSkus: p(`UPDATE skus SET missed_walks = missed_walks + 1
        WHERE deleted_at IS NULL AND id IN (SELECT sku_id FROM sku_sync WHERE listed_walk_id IS NOT ? )`),
      deleteMissedSkus: p(`UPDATE skus SET deleted_at = ? WHERE deleted_at IS NULL AND missed_walks >= ?`),
      unqueueDeleted: p(`UPDATE sku_sync SET pending_walk_id = NULL WHERE sku_id IN (SELECT id FROM skus WHERE deleted_at IS NOT NULL)`),

      // Stalest first: never fetched, then fetched longest ago (a budget-limited run converges on them).
      // Keyset pages of that order ('' sorts before every timestamp, as NULLS FIRST does).
      pending: p(`SELECT sku_id, coalesce(fetched_at, '') AS at FROM sku_sync
        WHERE pending_walk_id = ? AND (coalesce(fetched_at, ''), sku_id) > (?, ?)
        ORDER BY coalesce(fetched_at, ''), sku_id LIMIT ?`),
      queueStalest: p(`UPDATE sku_sync SET pending_walk_id = @walk WHERE sku_id IN (
          SELECT s.sku_id FROM sku_sync s JOIN skus k ON k.id = s.sku_id
          WHERE k.deleted_at IS NULL AND s.listed_walk_id = @walk AND s.pending_walk_id IS NOT @walk AND s.fetched_walk_id IS NOT @walk
          ORDER BY s.fetched_at ASC NULLS FIRST LIMIT @limit) RETURNING sku_id`),
      countCurrentSkus: p("SELECT count(*) AS n FROM skus WHERE deleted_at IS NULL"),
      countVerifiedBefore: p(`SELECT count(*) AS n FROM sku_sync s JOIN skus k ON k.id = s.sku_id
        WHERE k.deleted_at IS NULL AND (s.fetched_at IS NULL OR s.fetched_at < ?)`),
      runPlan: p(`UPDATE sync_runs SET skus_new = @new, skus_changed = @changed, skus_repolled = @repolled,
          skus_retried = @retried, skus_reverified = @reverified, request_budget = @budget WHERE id = @id`),
      lastResumeAfter: p("SELECT resume_after FROM sync_runs WHERE status <> 'running' ORDER BY id DESC LIMIT 1"),
      countPending: p("SELECT count(*) AS n FROM sku_sync WHERE pending_walk_id = ?"),

      lastRun: p("SELECT * FROM sync_runs ORDER BY id DESC LIMIT 1"),
      markInterrupted: p(`UPDATE sync_runs SET status = 'interrupted', finished_at = COALESCE(finished_at, ?),
          error = COALESCE(error, 'the process ended without finishing the run (killed or crashed)') WHERE status = 'running'`),
      insertRun: p(`INSERT INTO sync_runs (mode, started_at, status, walk_id, pid, list_cursor, list_done)
        VALUES (?, ?, 'running', ?, ?, ?, ?)`),
      setWalk: p("UPDATE sync_runs SET walk_id = id WHERE id = ?"),
      carryCounters: p(`UPDATE sync_runs SET skus_listed = (SELECT skus_listed FROM sync_runs WHERE id = ?) WHERE id = ?`),
      hasHistory: p("SELECT 1 FROM history WHERE sku_id = ? AND row_key = ? AND dup_index = ?"),
      anyHistory: p("SELECT 1 FROM history LIMIT 1"),
      historyIndexes: p("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'history' AND sql IS NOT NULL"),
      countHistory: p("SELECT count(*) AS n FROM history WHERE sku_id = ?"),
      historyKeys: p("SELECT row_key, dup_index FROM history WHERE sku_id = ?"),
      deleteHistoryRow: p("DELETE FROM history WHERE sku_id = ? AND row_key = ? AND dup_index = ?"),
      replayRows: p(`SELECT kind, occurred_at AS occurredAt, direction, quantity, observed_quantity AS observedQuantity,
          location_id AS locationId, row_key AS rowKey, dup_index AS dupIndex FROM history WHERE sku_id = ?
        ORDER BY occurred_at DESC, coalesce(first_seen_run_id, 0) DESC, rowid ASC`),
      runStats: p(`UPDATE sync_runs SET requests = @requests, requests_by_endpoint = @byEndpoint, requests_by_status = @byStatus, responses_429 = @r429,
          responses_503 = @r503, retries = @retries, wait_ms = @waitMs WHERE id = @id`),
      setLocationsSeen: p("UPDATE sync_runs SET locations_seen = ? WHERE id = ?"),
      setSkusDeleted: p("UPDATE sync_runs SET skus_deleted = ? WHERE id = ?"),
      finishRun: p("UPDATE sync_runs SET status = ?, finished_at = ?, error = ?, resume_after = ? WHERE id = ?"),
      journal: p(`INSERT INTO sync_journal (run_id, at, kind, endpoint, status, retry_after, wait_ms, sku_id, location_id, message)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    };
  }

  // ---- group commit ------------------------------------------------------------------------------

  /** Callers waiting for the open group's COMMIT (null: no group open). */
  private groupWaiters: GroupWaiter[] | null = null;

  /**
   * Run `unit` (a unit of work written with db.transaction, so inside the group it is a
   * SAVEPOINT: all of it or none of it) in the group transaction, and resolve once that has
   * committed. The group commits on setImmediate, so every unit finished in the same turn of
   * the event loop (responses that arrived together) shares one COMMIT, and pages they share
   * (sync_runs, sku_sync, the upper levels of every index) are written to the WAL once.
   * A caller that awaits it before starting its next unit holds at most one uncommitted unit,
   * exactly as with one transaction per unit: a kill loses only the units in hand.
   *
   * After the COMMIT the callers are resumed one per turn of the event loop, in order, as
   * separate network callbacks would have resumed them: each one's next steps (its next
   * request through the scheduler) run to their first wait before the next caller resumes.
   */
  grouped<T>(unit: () => T): Promise<T> {
    this.openGroup();
    let value: T;
    try {
      value = unit();
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<T>((resolve, reject) => this.groupWaiters!.push({ resolve: () => resolve(value), reject }));
  }

  /** Commit the group transaction now, if one is open (before finishing a run or closing). */
  flushGroup(): void {
    if (this.groupWaiters && this.db.open && this.db.inTransaction) this.db.exec("COMMIT");
  }

  private openGroup(): void {
    if (this.groupWaiters) return;
    // Someone else's transaction (not ours): the unit joins it, and the group resolves at once.
    const joined = this.db.inTransaction;
    if (!joined) this.db.exec("BEGIN");
    const waiters: GroupWaiter[] = [];
    this.groupWaiters = waiters;
    setImmediate(() => {
      this.groupWaiters = null;
      let error: unknown = null;
      try {
        if (!joined && this.db.open && this.db.inTransaction) this.db.exec("COMMIT");
      } catch (err) {
        error = err;
      }
      const next = (i: number): void => {
        if (i >= waiters.length) return;
        if (error) waiters[i]!.reject(error);
        else waiters[i]!.resolve();
        if (i + 1 < waiters.length) setImmediate(next, i + 1);
      };
      next(0);
    });
  }

  // ---- workspace -------------------------------------------------------------------------------

  /** Record the workspace; refuse (exit 4, nothing written) if the file belongs to another one. */
  bindWorkspace(ws: WorkspaceResponse): void {
    this.db.transaction(() => {
      const cur = this.s.getWorkspace.get() as { id: string; name: string } | undefined;
      if (cur && cur.id !== ws.workspace.id) throw databaseBelongsToAnother(cur, ws.workspace);
      if (cur) this.s.touchWorkspace.run(ws.workspace.name, ws.scope, iso(), cur.id);
      else this.s.insertWorkspace.run(ws.workspace.id, ws.workspace.name, ws.scope, iso());
    })();
  }

  // ---- runs --------------------------------------------------------------------------------------

  /**
   * Start a run. A run left 'running' by a killed process is marked 'interrupted' first.
   * A full run resumes the walk of the last full run when that walk did not finish:
   * same walk id, its list cursor, its queue of SKUs still to fetch.
   */
  startRun(mode: RunMode): RunState {
    return this.db.transaction((): RunState => {
      this.s.markInterrupted.run(iso());
      // Only the latest run of all is resumed: once another walk has run since, the old cursor and
      // queue describe a past state of the server. Either kind of run resumes an unfinished full
      // walk (as a full run: it finishes the backfill); a full run does not resume an incremental
      // walk, it starts the complete one it was asked for.
      const prev = this.s.lastRun.get() as
        | { id: number; mode: RunMode; status: RunStatus; walk_id: number; list_cursor: string | null; list_done: number }
        | undefined;
      const resumable = prev && (prev.mode === mode || prev.mode === "full") && prev.status !== "succeeded" && prev.walk_id != null;
      const now = iso();
      if (resumable) {
        const resumedMode = prev.mode;
        const info = this.s.insertRun.run(resumedMode, now, prev.walk_id, process.pid, prev.list_cursor, prev.list_done);
        const id = Number(info.lastInsertRowid);
        this.s.carryCounters.run(prev.id, id);
        const asked = resumedMode === mode ? "" : `; asked for an ${mode} run, this one finishes the unfinished ${resumedMode} walk first`;
        this.journal(id, { kind: "resume", message: `resuming the walk of run ${prev.walk_id} (previous run ${prev.id} ended ${prev.status})${asked}` });
        return { id, mode: resumedMode, walkId: prev.walk_id, listCursor: prev.list_cursor, listDone: prev.list_done === 1, resumedFrom: prev.id };
      }
      const info = this.s.insertRun.run(mode, now, null, process.pid, null, 0);
      const id = Number(info.lastInsertRowid);
      this.s.setWalk.run(id);
      return { id, mode, walkId: id, listCursor: null, listDone: false, resumedFrom: null };
    })();
  }

  saveRunCounters(runId: number, c: RunCounters): void {
    this.s.runStats.run({
      id: runId,
      requests: c.requests,
      byEndpoint: JSON.stringify(c.requestsByEndpoint),
      byStatus: JSON.stringify(c.requestsByStatus),
      r429: c.responses429,
      r503: c.responses503,
      retries: c.retries,
      waitMs: Math.round(c.waitMs),
    });
  }

  finishRun(runId: number, status: RunStatus, error: string | null = null, resumeAfter: string | null = null): void {
    // Text that came from elsewhere (server bodies, errors) is redacted before it is stored.
    this.s.finishRun.run(status, iso(), error === null ? null : redactSecrets(error), resumeAfter, runId);
  }

  journal(runId: number, e: JournalEntry): void {
    this.s.journal.run(
      runId, iso(), e.kind, e.endpoint ?? null, e.status ?? null, e.retryAfter ?? null,
      e.waitMs == null ? null : Math.round(e.waitMs), e.skuId ?? null, e.locationId ?? null, e.message == null ? null : redactSecrets(e.message),
    );
  }

  // ---- locations ---------------------------------------------------------------------------------

  /** The locations tree is one response, so it is one unit: upsert all, mark the absent. */
  saveLocations(runId: number, nodes: LocationNode[], deleteAfterMisses: number): { seen: number; deleted: number } {
    return this.db.transaction(() => {
      const now = iso();
      for (const n of nodes) {
        this.s.upsertLocation.run({
          id: n.id, name: n.name, code: n.code, parentId: n.parentId, parentName: n.parentName, nodeKind: n.nodeKind,
          depth: n.depth, pathIds: json(n.pathIds), pathNames: json(n.pathNames), displayPath: n.displayPath,
          isLeaf: bool(n.isLeaf), childCount: n.childCount, selectable: bool(n.selectable), status: n.status,
          updatedAt: n.updatedAt, now,
        });
      }
      this.s.missLocations.run(now);
      const deleted = this.s.deleteMissedLocations.run(now, deleteAfterMisses).changes;
      this.s.setLocationsSeen.run(nodes.length, runId);
      return { seen: nodes.length, deleted };
    })();
  }

  // ---- list pages --------------------------------------------------------------------------------

  /**
   * One list page, with the walk checkpoint. The planner says whether (and why) each SKU
   * needs detail + history in this walk; those are queued (sku_sync.pending_walk_id).
   * Returns the queued SKU ids with their reasons.
   */
  savePage(run: RunState, items: ListItem[], nextCursor: string | null, planner: Planner): Array<{ id: string; reason: PlanReason }> {
    return this.db.transaction(() => {
      const now = iso();
      const queued: Array<{ id: string; reason: PlanReason }> = [];
      for (const item of items) {
        this.s.upsertSku.run(skuParams(item, item.totalQuantity, now));
        this.s.deleteRootQty.run(item.id);
        for (const [rootId, qty] of Object.entries(item.locationQuantities)) this.s.insertRootQty.run(item.id, rootId, qty);
        const fingerprint = listFingerprint(item);
        const prev = this.s.getSkuSync.get(item.id) as PreviousState | undefined;
        const reason = planner.reason(item, fingerprint, prev);
        if (reason) queued.push({ id: item.id, reason });
        this.s.upsertSkuSync.run({ skuId: item.id, fingerprint, walkId: run.walkId, pending: reason ? run.walkId : null });
      }
      this.s.setListCheckpoint.run(nextCursor, nextCursor === null ? 1 : 0, items.length, queued.length, run.id);
      return queued;
    })();
  }

  /** Restart the list walk from page one (a rejected cursor). */
  resetListCursor(runId: number): void {
    this.s.setListCheckpoint.run(null, 0, 0, 0, runId);
  }

  /**
   * After a complete list walk: SKUs the walk did not return get one more miss, and
   * those at `deleteAfterMisses` are marked deleted (history and last quantities stay).
   */
  finishListWalk(run: RunState, deleteAfterMisses: number): number {
    return this.db.transaction(() => {
      this.s.missSkus.run(run.walkId);
      const deleted = this.s.deleteMissedSkus.run(iso(), deleteAfterMisses).changes;
      this.s.unqueueDeleted.run();
      this.s.setSkusDeleted.run(deleted, run.id);
      return deleted;
    })();
  }

  /**
   * SKUs still queued for this walk (resume), stalest first, read `pageSize` at a time so a
   * resumed walk of a large workspace never holds every queued id at once. Each page is read
   * whole, so the caller may write between two pages.
   */
  *pendingSkus(walkId: number, pageSize = 1_000): Generator<string> {
    let after = { at: "", id: "" };
    for (;;) {
      const rows = this.s.pending.all(walkId, after.at, after.id, pageSize) as Array<{ sku_id: string; at: string }>;
      for (const r of rows) yield r.sku_id;
      if (rows.length < pageSize) return;
      const last = rows[rows.length - 1]!;
      after = { at: last.at, id: last.sku_id };
    }
  }
  countPending(walkId: number): number {
    return (this.s.countPending.get(walkId) as { n: number }).n;
  }
  /**
   * Rotating re-verification: queue the `limit` SKUs fetched longest ago among those this
   * walk listed (not already queued or fetched in it). SKUs the list stopped returning are
   * left to the missed-walks rule rather than spending a request on them.
   */
  queueStalest(walkId: number, limit: number): string[] {
    if (limit <= 0) return [];
    return (this.s.queueStalest.all({ walk: walkId, limit }) as Array<{ sku_id: string }>).map((r) => r.sku_id);
  }
  /** Current SKUs whose detail and history were last stored before `iso` (or never). */
  countVerifiedBefore(isoTime: string): number {
    return (this.s.countVerifiedBefore.get(isoTime) as { n: number }).n;
  }
  countCurrentSkus(): number {
    return (this.s.countCurrentSkus.get() as { n: number }).n;
  }
  saveRunPlan(runId: number, p: { new: number; changed: number; repolled: number; retried: number; reverified: number; budget: number | null }): void {
    this.s.runPlan.run({ id: runId, ...p });
  }
  /** resume_after of the latest finished run (a quota wall), if still in the future. */
  resumeAfter(now = Date.now()): number | null {
    const r = this.s.lastResumeAfter.get() as { resume_after: string | null } | undefined;
    const t = r?.resume_after ? Date.parse(r.resume_after) : NaN;
    return Number.isFinite(t) && t > now ? t : null;
  }
  /**
   * The stored history of a SKU, newest first, as much as a replay needs (history-check.ts).
   * Ties on occurred_at: a later run's row is newer, and within one fetch the store inserted
   * rows as the server returned them, newest first (a smaller rowid is newer).
   */
  replayRows(skuId: string): Array<ReplayableRow & HistoryCopyKey> {
    return this.s.replayRows.all(skuId) as Array<ReplayableRow & HistoryCopyKey>;
  }

  /**
   * Does the detail show exactly the leaves, quantities and freshness (status, last replay)
   * stored for the SKU? Then a re-poll learned nothing that needs its history walked.
   */
  detailMatchesStored(skuId: string, detail: DetailResponse): boolean {
    const stored = new Map(
      (this.s.storedLeaves.all(skuId) as Array<{ location_id: string; quantity: number; freshness_status: string | null; freshness_last_replayed_at: string | null }>).map(
        (r) => [r.location_id, r],
      ),
    );
    const ids = new Set(detail.locations.map((l) => l.id));
    if (ids.size !== stored.size || ids.size !== detail.locations.length) return false;
    return detail.locations.every((l) => {
      const r = stored.get(l.id);
      return !!r && r.quantity === l.quantity && r.freshness_status === l.freshness.status && r.freshness_last_replayed_at === l.freshness.lastReplayedAt;
    });
  }

  /** Is this copy of a history row stored for the SKU? */
  hasHistoryRow(skuId: string, key: HistoryCopyKey): boolean {
    return this.s.hasHistory.get(skuId, key.rowKey, key.dupIndex) !== undefined;
  }

  // ---- history indexes during a backfill -----------------------------------------------------------

  /**
   * A backfill into an empty history table builds the table's four secondary indexes (the BI
   * queries' indexes; the sync itself only uses the primary key) once at the end instead of
   * row by row: rows of every SKU span the same dates, so each row lands on random pages of
   * those B-trees, and the WAL then carries tens of pages per SKU. Measured on a 20,000-SKU
   * backfill: half the wall time and a third less CPU, plus ~1.4 s to build the indexes after.
   *
   * Deferred when the history is empty, or when they are already missing and this run resumes
   * the walk that dropped them (a backfill killed midway). Only indexes whose definition is the
   * one below are touched, so a later migration that changes one is never undone. A run that
   * is interrupted leaves them for the next run (so a SIGTERM is not delayed by an index
   * build); any other run rebuilds them when its walk ends, and a run that does not defer
   * rebuilds missing ones before it starts. Readers (BI tools, status, reconcile) see the same
   * rows meanwhile, only without those indexes.
   */
  deferHistoryIndexes(run: RunState): boolean {
    const present = this.historyIndexes();
    const ours = Object.entries(HISTORY_INDEXES);
    // Someone else's definition: leave everything as it is.
    if (ours.some(([name, sql]) => present.has(name) && present.get(name) !== sql)) return false;
    const missing = ours.filter(([name]) => !present.has(name)).length;
    if (missing > 0 && run.resumedFrom !== null) return true;
    if (missing > 0 || this.s.anyHistory.get() !== undefined) {
      this.restoreHistoryIndexes();
      return false;
    }
    this.db.transaction(() => {
      for (const [name] of ours) this.db.exec(`DROP INDEX ${name}`);
    })();
    return true;
  }

  /** Build whichever of the history's secondary indexes are missing; returns how many. */
  restoreHistoryIndexes(): number {
    const present = this.historyIndexes();
    const missing = Object.entries(HISTORY_INDEXES).filter(([name]) => !present.has(name));
    if (missing.length) {
      this.db.transaction(() => {
        for (const [, sql] of missing) this.db.exec(sql);
      })();
    }
    return missing.length;
  }

  private historyIndexes(): Map<string, string> {
    const rows = this.s.historyIndexes.all() as Array<{ name: string; sql: string }>;
    return new Map(rows.map((r) => [r.name, r.sql]));
  }

  // ---- one SKU -----------------------------------------------------------------------------------

  /**
   * A SKU's detail and its complete (or, incrementally, newest) history, as one unit.
   * Per-leaf quantities are replaced whole: a leaf the server no longer returns for
   * this SKU is not current any more. History rows are inserted once per identity (content hash + copy ordinal).
   */
  saveSku(
    run: RunState,
    skuId: string,
    detail: DetailResponse,
    history: HistoryRow[],
    complete = false,
    opts: { historyWalked?: boolean } = {},
  ): { rowsAdded: number; rowsRemoved: number; notClean: DetailResponse["locations"] } {
    return this.db.transaction(() => {
      const now = iso();
      this.s.updateSkuFromDetail.run(skuParams(detail.sku, detail.totalQuantity, now));
      const before = new Map(
        (this.s.getLocQty.all(skuId) as Array<{ location_id: string; not_clean_since: string | null }>).map((r) => [r.location_id, r.not_clean_since]),
      );
      const notClean: DetailResponse["locations"] = [];
      for (const loc of detail.locations) {
        const dirty = scanNotReflected(loc.freshness.status);
        if (dirty) notClean.push(loc);
        this.s.upsertLocQty.run(
          skuId, loc.id, loc.quantity, loc.freshness.status, loc.freshness.lastReplayedAt, loc.freshness.lastSourceKind,
          loc.name, loc.code, loc.parentId, now, dirty ? (before.get(loc.id) ?? now) : null,
        );
        before.delete(loc.id);
      }
      for (const gone of before.keys()) this.s.deleteLocQty.run(skuId, gone);

      // Every copy of a row identical to another is stored (history is a multiset): copy n of
      // a content is (row_key, n), counted over this fetch in the server's order.
      let rowsAdded = 0;
      const copies = historyCopies(history);
      const keys = complete ? new Set<string>() : null;
      for (let i = 0; i < history.length; i++) {
        const r = history[i]!;
        const k = copies[i]!;
        keys?.add(copyId(k));
        rowsAdded += this.s.insertHistory.run(
          skuId, k.rowKey, k.dupIndex, r.kind, r.occurredAt, r.direction, r.quantity, r.locationId, r.locationName, r.locationCode,
          r.eventId, r.eventTypeCode, r.eventTypeName, r.setSessionId, r.setTypeCode, r.observedQuantity, r.note, run.id,
        ).changes;
      }
      // A complete walk is the SKU's whole history as the server has it now: a stored row it
      // no longer returns was rewritten (a SET's delta changes when a late row lands before
      // it) or withdrawn, and goes (so does a copy the server no longer has as many of). The
      // count tells cheaply whether there is any such row.
      let rowsRemoved = 0;
      if (keys && (this.s.countHistory.get(skuId) as { n: number }).n > keys.size) {
        for (const { row_key, dup_index } of this.s.historyKeys.all(skuId) as Array<{ row_key: string; dup_index: number }>) {
          if (!keys.has(copyId({ rowKey: row_key, dupIndex: dup_index }))) rowsRemoved += this.s.deleteHistoryRow.run(skuId, row_key, dup_index).changes;
        }
      }
      for (const loc of notClean) {
        this.journal(run.id, {
          kind: "freshness",
          skuId,
          locationId: loc.id,
          message: `freshness ${loc.freshness.status ?? "missing"}: the latest scan may not be reflected (last replayed ${loc.freshness.lastReplayedAt ?? "unknown"})`,
        });
      }
      if (opts.historyWalked === false) this.s.skuDetailPolled.run(run.walkId, skuId);
      else this.s.skuFetched.run(run.walkId, now, skuId);
      this.s.runSkuDone.run(rowsAdded, run.id);
      return { rowsAdded, rowsRemoved, notClean };
    })();
  }

  /** Detail/history kept failing: journal it; the SKU stays queued for the next run. */
  skuFailed(runId: number, skuId: string, endpoint: string | null, status: number | null, message: string): void {
    this.db.transaction(() => {
      this.s.skuFailed.run(redactSecrets(message), skuId);
      this.s.runSkuFailed.run(runId);
      this.journal(runId, { kind: "sku_failed", skuId, endpoint, status, message });
    })();
  }

  /** The server says the SKU does not exist (404 on detail): it is gone, not failed. */
  skuVanished(runId: number, skuId: string): void {
    this.db.transaction(() => {
      this.s.skuVanished.run(skuId);
      this.s.markSkuDeleted.run(iso(), skuId);
      this.journal(runId, { kind: "sku_vanished", skuId, endpoint: "detail", status: 404, message: "listed, but detail answered 404: marked deleted" });
    })();
  }
}

function skuParams(s: DetailResponse["sku"], totalQuantity: number, now: string) {
  return {
    id: s.id, code: s.code, skuCode: s.skuCode, name: s.name, barcode: s.barcode, unit: s.unit,
    productId: s.product.id, productName: s.product.name, productBrand: s.product.brand,
    options: JSON.stringify(s.options), totalQuantity, now,
  };
}

export function databaseBelongsToAnother(db: { id: string; name: string }, api: { id: string; name: string }): WorkspaceMismatchError {
  return new WorkspaceMismatchError(
    `this database belongs to workspace ${db.id} ("${db.name}"), but the key is connected to workspace ${api.id} ("${api.name}"). ` +
      `Use another --db for that workspace; nothing was written.`,
  );
}
