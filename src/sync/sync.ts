/**
 * A sync run: the one function the CLI's `sync` and the daemon's timer both call.
 *
 *   workspace check -> locations tree -> list walk ----page ids----> SKU workers
 *                                        (checkpointed)               (detail + history -> one transaction each)
 *
 * The list walk and the per-SKU fetches are pipelined through a bounded queue, all
 * requests share one scheduler (quota, pauses, retries), and every unit of work is
 * committed with its own checkpoint, so a killed run resumes where it stopped.
 */
import type { Logger } from "../core/logger.js";
import type { ResolvedConfig } from "../core/config.js";
import { DEFAULTS } from "../core/defaults.js";
import { ApiError, describeError, SyncError, WorkspaceMismatchError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import type { DetailResponse, HistoryRow, WorkspaceResponse } from "../core/api-schemas.js";
import { ApiClient, type RequestTrace } from "../client/api-client.js";
import { RequestScheduler, type Clock, type SchedulerEvent } from "../scheduler/scheduler.js";
import { acquireWriterLock, assertMirrorDatabase, checkDirectory, checkWritable, openDatabase, peekDatabase, type DB } from "../store/db.js";
import { copyId, databaseBelongsToAnother, historyCopies, historyRowKey, Store, type JournalEntry, type RunMode, type RunState, type RunStatus } from "../store/store.js";
import { saveSnapshot } from "../store/snapshots.js";
import { startWalGuard, type WalGuard } from "../store/wal-guard.js";
import { WorkQueue } from "./queue.js";
import { unexplainedLeaves, type ReplayableRow } from "./history-check.js";
import { fetchDetail, fetchSku, walkList } from "./walker.js";
import { planFull, planIncremental, reverifyShare, type PlanReason, type Planner } from "./planner.js";
import type { ProgressSink } from "./progress.js";

export interface SyncOptions {
  mode: RunMode;
  config: ResolvedConfig;
  key: Secret;
  logger: Logger;
  /** Aborting it (SIGINT/SIGTERM, daemon stop) ends the run as 'interrupted' after the transaction in hand. */
  signal: AbortSignal;
  progress?: ProgressSink;
  clock?: Clock;
  /** Start even though the last run stored a quota wall still in force (`sync --ignore-quota-wall`); the run journals it. */
  ignoreQuotaWall?: boolean;
}

export interface SyncResult {
  runId: number;
  mode: RunMode;
  status: RunStatus;
  resumedFrom: number | null;
  workspace: { id: string; name: string };
  skusListed: number;
  skusPlanned: number;
  /** Why SKUs were queued: new, changed (the list showed it), repolled (freshness not clean), retried, reverified (rotation). */
  plan: Record<PlanReason | "reverified", number>;
  skusFetched: number;
  skusFailed: number;
  skusDeleted: number;
  locations: number;
  historyRowsAdded: number;
  /** SKUs whose incremental history did not add up to their quantities, so their whole history was walked. */
  historyDeepWalks: number;
  /** Re-polled SKUs whose detail showed nothing new: stored with that one request, history not walked. */
  repolledDetailOnly: number;
  requests: number;
  requestsByEndpoint: Record<string, number>;
  /** Attempts by HTTP status ("2xx" for successes) or error kind (network, timeout, invalid-response). */
  requestsByStatus: Record<string, number>;
  responses429: number;
  responses503: number;
  retries: number;
  waitMs: number;
  durationMs: number;
  resumeAfter: string | null;
  /** Why the run did not succeed. */
  error: Error | null;
}

interface QueuedSku {
  id: string;
  /** Walk the whole history even in an incremental run (rotating re-verification). */
  fullHistory: boolean;
  /** Re-polled only because its stored freshness is not clean: detail first, history only if the detail moved. */
  repoll: boolean;
}

/** Failed SKUs below this count never abort a run, whatever the share (small workspaces). */
const MIN_FAILURES_TO_ABORT = 10;
/** Ids buffered between the list walk and the workers. */
const QUEUE_CAPACITY = 2_000;
/** How often run counters are written while a run is going. */
const COUNTER_FLUSH_MS = 2_000;

/** Workers, scheduler and client for one process, from the resolved config. */
export function createApi(config: ResolvedConfig, key: Secret, onEvent?: (e: SchedulerEvent) => void, clock?: Clock, pausedUntil?: number, logger?: Logger) {
  if (!config.baseUrl) {
    throw new SyncError("no base URL: set --base-url, INVENTORY_BASE_URL or baseUrl in the config file (try 'inventory-mirror simulate' for a local one)");
  }
  const scheduler = new RequestScheduler({
    concurrency: config.concurrency,
    requestsPerSecond: config.rateLimit.requestsPerSecond,
    maxRetries: config.retry.maxRetries,
    max429Retries: config.retry.max429Retries,
    backoffBaseMs: config.retry.backoffBaseMs,
    backoffCapMs: config.retry.backoffCapMs,
    minRetryAfterMs: config.retry.minRetryAfterMs,
    maxWaitMs: config.rateLimit.maxWaitSeconds * 1000,
    maxRequests: config.sync.maxRequests,
    adaptive: config.rateLimit.adaptive,
    // Origin and path prefix only: a base URL never carries credentials (config refuses userinfo).
    server: (config.baseUrl.origin + config.baseUrl.pathname).replace(/\/+$/, ""),
    ...(pausedUntil ? { pausedUntil } : {}),
    ...(clock ? { clock } : {}),
    ...(onEvent ? { onEvent } : {}),
  });
  const client = new ApiClient({
    baseUrl: config.baseUrl,
    key,
    scheduler,
    http: { ...config.http, connections: config.concurrency },
    ...(logger?.isLevelEnabled("trace") ? { onRequest: (r: RequestTrace) => logger.trace(r, "request") } : {}),
  });
  return { client, scheduler };
}

/**
 * The writer connection's settings for a sync (after startWalGuard, which set its own): its
 * automatic checkpoint at a quarter of the WAL cap instead of every 1,000 pages. The guard's
 * timer checkpoints every second anyway, and a writer that checkpoints itself every 1,000
 * pages (a few dozen SKUs) spends its time copying pages and waiting for fsync.
 * (A larger page cache was measured too: no faster once a backfill defers the history
 * indexes, and 30 MB more peak RSS at 20,000 SKUs; SQLite's default stays.)
 */
export function tuneWriter(db: DB, walCapBytes: number): void {
  const pageSize = db.pragma("page_size", { simple: true }) as number;
  db.pragma(`wal_autocheckpoint = ${Math.max(1000, Math.floor(walCapBytes / 4 / pageSize))}`);
}

/** Refuse a key that points at another workspace than the one configured. */
export function checkExpectedWorkspace(ws: WorkspaceResponse, config: ResolvedConfig): void {
  const wrongId = config.expectedWorkspace.id !== null && ws.workspace.id !== config.expectedWorkspace.id;
  const wrongName = config.expectedWorkspace.name !== null && ws.workspace.name !== config.expectedWorkspace.name;
  if (wrongId || wrongName) {
    const expected = `id ${config.expectedWorkspace.id ?? "(any)"}, name "${config.expectedWorkspace.name ?? "(any)"}"`;
    throw new WorkspaceMismatchError(
      `the key is connected to workspace ${ws.workspace.id} ("${ws.workspace.name}"), not the expected workspace (${expected}). ` +
        `Check the key or --expected-workspace-id/--expected-workspace-name; nothing was written.`,
    );
  }
}

export async function runSync(opts: SyncOptions): Promise<SyncResult> {
  const { config, logger } = opts;
  checkDirectory(config.db);
  // Another program's database is refused before anything is written to it (no lock file, no WAL switch).
  assertMirrorDatabase(config.db);
  checkWritable(config.db);
  const started = Date.now();
  // One writer per file, decided before any request: a second process costs no quota.
  const lock = acquireWriterLock(config.db);
  const pendingJournal: JournalEntry[] = [];
  let journalSink: ((e: JournalEntry) => void) | null = null;
  const onEvent = (e: SchedulerEvent) => {
    const entry = journalEntryFor(e);
    if (!entry) return;
    if (e.type === "suspicious") logger.warn({ endpoint: e.endpoint, status: e.status }, e.message);
    if (e.type === "backoff") logger.warn({ endpoint: e.endpoint, status: e.status, retryAfter: e.retryAfter, waitMs: e.waitMs }, `backing off: ${e.message}`);
    if (journalSink) journalSink(entry);
    else pendingJournal.push(entry);
  };
  let store: Store | null = null;
  let walGuard: WalGuard | null = null;
  let api: ReturnType<typeof createApi> | null = null;
  // Internal abort: a fatal error in one worker stops the others; the caller's signal does too.
  const ac = new AbortController();
  const onOuterAbort = () => ac.abort(opts.signal.reason);
  // A run that never ends (a server that stalls without ever failing) stops here, resumable.
  const deadline = setTimeout(() => {
    const e = new SyncError(`the run reached its deadline of ${formatSeconds(config.sync.maxRunSeconds * 1000)} (sync.maxRunSeconds) and stopped; the next run resumes`);
    e.deadline = true;
    ac.abort(e);
  }, config.sync.maxRunSeconds * 1000);
  opts.signal.addEventListener("abort", onOuterAbort, { once: true });
  const signal = ac.signal;
  try {
    // What the file already says, read without writing: its workspace, and a quota wall still in force.
    const peek = peekDatabase(config.db);
    const wall = peek?.resumeAfter ?? null;
    if (wall !== null && opts.ignoreQuotaWall) {
      const message = `quota wall until ${new Date(wall).toISOString()} ignored (--ignore-quota-wall)`;
      logger.warn({ resumeAfter: new Date(wall).toISOString() }, message);
      pendingJournal.push({ kind: "info", message });
    }
    api = createApi(config, opts.key, onEvent, opts.clock, wall !== null && !opts.ignoreQuotaWall ? wall : undefined, logger);
    const { client, scheduler } = api;

    // Who is this key for? Nothing is written before this and the database check pass.
    const ws = await client.workspace(signal);
    checkExpectedWorkspace(ws, config);
    if (peek?.workspace && peek.workspace.id !== ws.workspace.id) throw databaseBelongsToAnother(peek.workspace, ws.workspace);

    const db = openDatabase(config.db);
    store = new Store(db);
    // BI readers may hold the WAL; the guard keeps it under the cap without blocking us.
    walGuard = startWalGuard(db, { capBytes: Math.round(config.storage.walCapMegabytes * 1048576), intervalMs: config.storage.walCheckIntervalMs });
    tuneWriter(db, Math.round(config.storage.walCapMegabytes * 1048576));
    store.bindWorkspace(ws);
    const run = store.startRun(opts.mode);
    const s = store;
    journalSink = (e) => s.journal(run.id, e);
    for (const e of pendingJournal.splice(0)) journalSink(e);
    if (run.mode !== opts.mode) logger.info({ runId: run.id, resumedFrom: run.resumedFrom }, `an unfinished ${run.mode} walk (run ${run.resumedFrom}) is resumed first: this run finishes it as a ${run.mode} run`);
    logger.info({ runId: run.id, mode: run.mode, walkId: run.walkId, resumedFrom: run.resumedFrom }, run.resumedFrom ? "resuming an unfinished walk" : "sync started");

    const result = await executeRun(run, s, client, scheduler, opts, signal, ac, ws);
    result.durationMs = Date.now() - started;
    return result;
  } finally {
    clearTimeout(deadline);
    opts.signal.removeEventListener("abort", onOuterAbort);
    await api?.client.close().catch(() => {});
    walGuard?.stop();
    try {
      store?.flushGroup();
    } finally {
      store?.db.close();
    }
    lock.release();
  }
}

async function executeRun(
  run: RunState,
  store: Store,
  client: ApiClient,
  scheduler: RequestScheduler,
  opts: SyncOptions,
  signal: AbortSignal,
  ac: AbortController,
  ws: WorkspaceResponse,
): Promise<SyncResult> {
  const { config, logger } = opts;
  const incremental = run.mode === "incremental";
  const planner: Planner = incremental ? planIncremental(run) : planFull(run);
  // A backfill into an empty history builds the history's BI indexes once, at the end (store.ts).
  if (store.deferHistoryIndexes(run)) logger.info({ runId: run.id }, "backfill: the history's secondary indexes are built once the walk ends");
  const deleteAfterMisses = incremental ? 2 : 1;
  const counters = { listed: 0, planned: 0, fetched: 0, failed: 0, deleted: 0, locations: 0, rowsAdded: 0, deepWalks: 0, detailOnly: 0 };
  const reasons: Record<PlanReason | "reverified", number> = { new: 0, changed: 0, repolled: 0, retried: 0, reverified: 0 };
  let fatal: Error | null = null;
  // A queued SKU carries whether its whole history is walked even in an incremental run (rotating re-verification).
  const queue = new WorkQueue<QueuedSku>(QUEUE_CAPACITY);
  // Memory stays flat whatever the workspace size: no set of every SKU id. A SKU is queued at
  // most once per run because the database says what is done (fetched in this walk: the
  // planner skips it), `active` holds what is queued or in a worker's hands (at most the
  // queue's capacity plus the workers), and `settled` what ended in this run without being
  // fetched (failed or vanished: exceptional, and bounded by maxFailedShare).
  const active = new Set<string>();
  const settled = new Set<string>();
  let enqueuedCount = 0;
  let total: number | null = null;
  let snapshotSaved = false;
  const alreadyDone = run.resumedFrom ? countFetchedInWalk(store, run.walkId) : 0;

  const fail = (err: Error) => {
    if (!fatal) fatal = err;
    queue.clear();
    ac.abort(err);
  };
  // Any abort (a signal, a fatal error) releases a producer blocked on a full queue: the
  // workers stop taking, and what was queued stays queued in sku_sync for the next run.
  signal.addEventListener("abort", () => queue.clear(), { once: true });
  const flush = () =>
    store.saveRunCounters(run.id, {
      requests: scheduler.stats.requests,
      requestsByEndpoint: scheduler.stats.byEndpoint,
      requestsByStatus: scheduler.stats.byStatus,
      responses429: scheduler.stats.rateLimited,
      responses503: scheduler.stats.unavailable,
      retries: scheduler.stats.retries,
      waitMs: scheduler.stats.waitMs,
    });
  const flushTimer = setInterval(flush, COUNTER_FLUSH_MS);
  flushTimer.unref();
  const report = () =>
    opts.progress?.update({
      done: alreadyDone + counters.fetched,
      failed: counters.failed,
      total,
      requests: scheduler.stats.requests,
      waitMs: scheduler.stats.waitMs,
      pausedUntil: scheduler.pausedUntil,
    });

  const enqueue = async (id: string, fullHistory = false, repoll = false): Promise<boolean> => {
    if (active.has(id) || settled.has(id)) return false;
    active.add(id);
    enqueuedCount++;
    await queue.put({ id, fullHistory, repoll });
    return true;
  };

  const produce = async () => {
    try {
      const loc = await client.locations(signal);
      counters.locations = store.saveLocations(run.id, loc.locations, deleteAfterMisses).seen;
      // A resumed walk first finishes the SKUs its predecessor had queued, stalest first.
      if (run.resumedFrom) for (const id of store.pendingSkus(run.walkId)) await enqueue(id);
      if (!run.listDone) {
        for await (const page of walkList(client, { limit: DEFAULTS.listPageSize, startCursor: run.listCursor }, signal)) {
          if (page.restarted) {
            store.journal(run.id, { kind: "retry", endpoint: "list", message: "the server rejected a list cursor; the walk restarted from the first page" });
            logger.warn("the server rejected a list cursor; restarting the list walk from the first page");
          }
          // The root summaries and totals cover the whole result, so the first page's are the run's snapshot.
          if (!snapshotSaved) {
            saveSnapshot(store.db, run.id, page.roots, page.summary);
            snapshotSaved = true;
          }
          if (page.summary?.skuCount != null && total === null && !incremental) total = page.summary.skuCount;
          // The last page and the end of the walk (misses, deletions) commit together: a run
          // stopped after it must not leave list_done set with the walk's deletions not applied,
          // since a resumed run skips the list walk.
          const queued = await store.grouped(() =>
            page.nextCursor === null
              ? store.db.transaction(() => {
                  const q = store.savePage(run, page.items, page.nextCursor, planner);
                  counters.deleted = store.finishListWalk(run, deleteAfterMisses);
                  return q;
                })()
              : store.savePage(run, page.items, page.nextCursor, planner),
          );
          counters.listed += page.items.length;
          counters.planned += queued.length;
          logger.debug({ items: page.items.length, queued: queued.length, last: page.nextCursor === null, listed: counters.listed }, "list page saved");
          for (const q of queued) {
            reasons[q.reason]++;
            await enqueue(q.id, false, q.reason === "repolled");
          }
          if (signal.aborted) return;
        }
        if (incremental) {
          // What the list cannot show (a transfer inside one root, a SET confirming the same
          // count) is caught by re-verifying, each cycle, the SKUs verified longest ago.
          const share = reverifyShare(store.countCurrentSkus(), cycleIntervalMs(store, run), config.sync.reverifyWindowHours * 3_600_000);
          let due = Math.max(share, store.countVerifiedBefore(new Date(Date.now() - config.sync.reverifyWindowHours * 3_600_000).toISOString()));
          // In slices, so a cycle where every SKU is due does not hold every id at once.
          while (due > 0 && !signal.aborted) {
            const ids = store.queueStalest(run.walkId, Math.min(due, QUEUE_CAPACITY));
            if (ids.length === 0) break;
            due -= ids.length;
            for (const id of ids) {
              if (await enqueue(id, true)) {
                reasons.reverified++;
                counters.planned++;
              }
            }
          }
        }
      }
      if (total === null) total = alreadyDone + enqueuedCount;
    } catch (err) {
      if (!signal.aborted) fail(err as Error);
    } finally {
      queue.close();
    }
  };

  const work = async () => {
    for (;;) {
      const next = await queue.take();
      if (next.done || signal.aborted) return;
      const skuId = next.value.id;
      let done = false;
      try {
        // A re-poll costs one request when the detail shows nothing new (issue 10 §3).
        const polled = next.value.repoll ? await fetchDetail(client, skuId, signal) : undefined;
        if (polled && store.detailMatchesStored(skuId, polled) && historyAddsUp(store, skuId, polled, [])) {
          await store.grouped(() => store.saveSku(run, skuId, polled, [], false, { historyWalked: false }));
          done = true;
          counters.fetched++;
          counters.detailOnly++;
          continue;
        }
        const enough = incremental && !next.value.fullHistory ? historyStop(store, skuId, config.sync.historyOverlapRows) : undefined;
        let f = await fetchSku(client, skuId, { historyLimit: DEFAULTS.historyPageSize, ...(enough ? { enough } : {}), ...(polled ? { detail: polled } : {}) }, signal);
        if (!f.complete && !historyAddsUp(store, skuId, f.detail, f.history)) {
          // A row arrived late, deeper than the lookback overlap: walk the whole history.
          counters.deepWalks++;
          logger.debug({ skuId }, "history does not add up to the detail's quantities: walking all of it");
          f = await fetchSku(client, skuId, { historyLimit: DEFAULTS.historyPageSize, detail: f.detail }, signal);
        }
        // Committed with whatever other workers finished in the same turn (one COMMIT for all);
        // awaited, so a worker never holds more than one uncommitted SKU.
        const saved = await store.grouped(() => store.saveSku(run, skuId, f.detail, f.history, f.complete));
        done = true;
        counters.fetched++;
        counters.rowsAdded += saved.rowsAdded;
        logger.debug({ skuId, historyRows: f.history.length, rowsAdded: saved.rowsAdded, requests: f.requests, complete: f.complete }, "SKU saved");
      } catch (err) {
        if (signal.aborted) return;
        if (!(err instanceof ApiError) || err.kind === "auth" || err.kind === "quota-wall" || err.kind === "budget" || err.kind === "unreachable") return fail(err as Error);
        if (err.endpoint === "detail" && err.status === 404) {
          store.skuVanished(run.id, skuId);
          continue;
        }
        counters.failed++;
        store.skuFailed(run.id, skuId, err.endpoint, err.status, err.message);
        logger.warn({ skuId, endpoint: err.endpoint, status: err.status }, `SKU failed: ${err.message}`);
        const share = counters.failed / Math.max(1, counters.planned + alreadyDone);
        if (counters.failed >= MIN_FAILURES_TO_ABORT && share > config.sync.maxFailedShare) {
          fail(new SyncError(`${counters.failed} SKUs failed (${(share * 100).toFixed(1)}% > sync.maxFailedShare ${config.sync.maxFailedShare * 100}%); last: ${err.message}`));
        }
      } finally {
        // Fetched (the database now says so), or settled for this run: either way no longer in hand.
        active.delete(skuId);
        if (!done) settled.add(skuId);
        report();
      }
    }
  };

  report();
  await Promise.all([produce(), ...Array.from({ length: config.concurrency }, work)]);
  store.flushGroup();
  clearInterval(flushTimer);
  flush();
  store.saveRunPlan(run.id, { ...reasons, budget: config.sync.maxRequests });

  let status: RunStatus;
  let error: Error | null = fatal;
  let resumeAfter: string | null = null;
  const fatalErr = fatal as Error | null;
  const stopped = ac.signal.reason;
  if (stopped instanceof SyncError && stopped.deadline && !opts.signal.aborted) {
    status = "partial";
    error = stopped;
    store.journal(run.id, { kind: "partial", message: stopped.message });
  } else if (fatalErr instanceof ApiError && (fatalErr.kind === "quota-wall" || fatalErr.kind === "budget" || fatalErr.kind === "unreachable")) {
    status = "partial";
    if (fatalErr.kind === "unreachable") {
      store.journal(run.id, { kind: "partial", endpoint: fatalErr.endpoint, message: `${fatalErr.message}` });
    } else if (fatalErr.kind === "quota-wall") {
      resumeAfter = fatalErr.resumeAfter ? new Date(fatalErr.resumeAfter).toISOString() : null;
      store.journal(run.id, { kind: "partial", endpoint: fatalErr.endpoint, status: fatalErr.status, message: `quota wall: resume after ${resumeAfter}` });
    } else {
      store.journal(run.id, { kind: "partial", message: `request budget of ${config.sync.maxRequests} spent; remaining work stays queued` });
    }
  } else if (fatalErr) {
    status = "failed";
  } else if (opts.signal.aborted) {
    status = "interrupted";
    error = new SyncError("interrupted before the run finished; the next 'sync' resumes it");
    store.journal(run.id, { kind: "interrupted", message: "stopped by signal; the next run resumes the walk" });
  } else if (counters.failed > 0) {
    status = "partial";
    error = new SyncError(`${counters.failed} SKU(s) failed and stay queued; the next run retries them (see sync_journal)`);
  } else {
    status = "succeeded";
  }
  if (error && status === "failed") store.journal(run.id, { kind: "error", message: describeError(error) });
  if (status !== "interrupted") {
    // Interrupted runs leave it to the next run, so a SIGTERM is never held up by an index build.
    const t0 = Date.now();
    const built = store.restoreHistoryIndexes();
    if (built) logger.info({ runId: run.id, indexes: built, ms: Date.now() - t0 }, "history indexes built");
  }
  store.finishRun(run.id, status, error ? describeError(error) : null, resumeAfter);
  logger.info({ runId: run.id, status, plan: reasons }, `sync ${status}`);

  return {
    runId: run.id,
    mode: run.mode,
    status,
    resumedFrom: run.resumedFrom,
    workspace: ws.workspace,
    skusListed: counters.listed,
    skusPlanned: counters.planned,
    plan: reasons,
    skusFetched: counters.fetched,
    skusFailed: counters.failed,
    skusDeleted: counters.deleted,
    locations: counters.locations,
    historyRowsAdded: counters.rowsAdded,
    historyDeepWalks: counters.deepWalks,
    repolledDetailOnly: counters.detailOnly,
    requests: scheduler.stats.requests,
    requestsByEndpoint: { ...scheduler.stats.byEndpoint },
    requestsByStatus: { ...scheduler.stats.byStatus },
    responses429: scheduler.stats.rateLimited,
    responses503: scheduler.stats.unavailable,
    retries: scheduler.stats.retries,
    waitMs: scheduler.stats.waitMs,
    durationMs: 0,
    resumeAfter,
    error,
  };
}

/**
 * Incremental history: pages come newest first; stop once the walk has reached rows
 * already stored and then gone `overlap` known rows further, and past the whole group
 * of rows sharing the first known row's occurredAt (ties). The overlap catches rows
 * that arrived late with an older occurredAt, down to that depth.
 */
export function historyStop(store: Store, skuId: string, overlap: number): (rows: HistoryRow[], lastPage: HistoryRow[]) => boolean {
  let firstKnownAt: string | null = null;
  let knownAfter = 0;
  // Copies seen so far per content, so the nth identical row is known only if n copies are stored (historyCopies).
  const copies = new Map<string, number>();
  return (_rows, lastPage) => {
    let last: HistoryRow | undefined;
    for (const r of lastPage) {
      const rowKey = historyRowKey(r);
      const dupIndex = copies.get(rowKey) ?? 0;
      copies.set(rowKey, dupIndex + 1);
      if (store.hasHistoryRow(skuId, { rowKey, dupIndex })) {
        if (firstKnownAt === null) firstKnownAt = r.occurredAt;
        knownAfter++;
      }
      last = r;
    }
    return firstKnownAt !== null && knownAfter > overlap && last !== undefined && last.occurredAt < firstKnownAt;
  };
}

/**
 * Do the newest pages just fetched, followed by the older rows already stored, explain the
 * detail's quantities? The fetched rows come first, in the server's order.
 */
function historyAddsUp(store: Store, skuId: string, detail: DetailResponse, fetched: HistoryRow[]): boolean {
  const rows: ReplayableRow[] = [...fetched];
  const fetchedKeys = new Set(historyCopies(fetched).map(copyId));
  for (const r of store.replayRows(skuId)) if (!fetchedKeys.has(copyId(r))) rows.push(r);
  return unexplainedLeaves(rows, detail).length === 0;
}

/** The cadence of incremental runs, measured: time since the previous one started (1 min to 1 day); 5 min when unknown. */
function cycleIntervalMs(store: Store, run: RunState): number {
  const prev = store.db
    .prepare("SELECT started_at FROM sync_runs WHERE mode = 'incremental' AND id < ? ORDER BY id DESC LIMIT 1")
    .get(run.id) as { started_at: string } | undefined;
  const gap = prev ? Date.now() - Date.parse(prev.started_at) : 5 * 60_000;
  return Math.min(Math.max(gap, 60_000), 86_400_000);
}

function countFetchedInWalk(store: Store, walkId: number): number {
  return (store.db.prepare("SELECT count(*) AS n FROM sku_sync WHERE fetched_walk_id = ?").get(walkId) as { n: number }).n;
}

function journalEntryFor(e: SchedulerEvent): JournalEntry | null {
  switch (e.type) {
    case "backoff":
      return {
        kind: "backoff",
        endpoint: e.endpoint,
        status: e.status,
        retryAfter: e.retryAfter,
        waitMs: e.waitMs,
        message: `${e.scope === "all" ? "all workers paused" : "request backed off"} ${Math.round(e.waitMs)} ms before attempt ${e.attempt + 1}: ${e.message}`,
      };
    case "failure":
      return { kind: "error", endpoint: e.endpoint, status: e.status, message: e.message };
    case "rate":
      return { kind: "rate", message: describeRate(e) };
    case "suspicious":
      return { kind: "suspicious", endpoint: e.endpoint, status: e.status, retryAfter: e.retryAfter, message: e.message };
  }
}

function describeRate(e: Extract<SchedulerEvent, { type: "rate" }>): string {
  const rate = e.requestsPerSecond === null ? "unpaced" : `${e.requestsPerSecond.toFixed(1)} req/s`;
  const fmt = (v: number | null) => (v === null ? "?" : Number.isFinite(v) ? v.toFixed(1) : "∞");
  const quota = e.fitLow === null ? "" : `, quota between ${fmt(e.fitLow)} and ${fmt(e.fitHigh)} req/s`;
  return `send rate ${rate} (${e.phase}${quota}), up to ${e.inFlightLimit} in flight`;
}

function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return s >= 3600 ? `${+(s / 3600).toFixed(2)} h` : s >= 60 ? `${+(s / 60).toFixed(1)} min` : `${+s.toFixed(1)} s`;
}
