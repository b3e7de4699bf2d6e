/**
 * A sync run: the one function the CLI's `sync` and the daemon's timer both call.
 *
 *   workspace check -> locations tree -> list walk ----page ids----> SKU workers
 *                                        (checkpointed)               (detail + history -> one transaction each)
 *
 * The list walk and the per-SKU fetches are pipelined through a bounded queue, all
 * requests share one scheduler (quota, pauses, retries), and every unit of work is
 * committed with its own checkpoint, so a killed run resumes where it stopped.
 *
 * The story of a run, one file per chapter:
 *   runSync          checks, lock, workspace, database, the run's row      (this file)
 *   executeRun       producer and workers side by side, then the outcome   (this file)
 *   walkAndPlan      locations, the list walk and its plan                 (list-walk.ts)
 *   queueReverification  the stalest SKUs of an incremental run            (reverify.ts)
 *   runWorker        one SKU fetched and saved, with an explicit result    (sku-work.ts)
 *   decideOutcome    status, error, journal and exit code: pure functions  (outcome.ts)
 * They share one RunContext (run-context.ts).
 */
import type { Logger } from "../core/logger.js";
import type { ResolvedConfig } from "../core/config.js";
import { describeError, SyncError, WorkspaceMismatchError } from "../core/errors.js";
import type { Secret } from "../core/secret.js";
import type { WorkspaceResponse } from "../core/api-schemas.js";
import { ApiClient, type RequestTrace } from "../client/api-client.js";
import { poolTransport } from "../client/transport.js";
import { RequestScheduler, type Clock, type SchedulerEvent } from "../scheduler/scheduler.js";
import { acquireWriterLock, assertMirrorDatabase, checkDirectory, checkWritable, openDatabase, type DB } from "../store/db.js";
import { peekDatabase, type KeptQuota, type KeptQuotaRow } from "../store/runs.js";
import { databaseBelongsToAnother, Store, type RunCounters, type RunMode, type RunState, type RunStatus } from "../store/store.js";
import { startWalGuard, type WalGuard } from "../store/wal-guard.js";
import { planFull, planIncremental, type PlanReason } from "./planner.js";
import type { ProgressSink } from "./progress.js";
import { newTally, reportProgress, RunStop, type RunContext } from "./run-context.js";
import { RunJournal } from "./run-journal.js";
import { SkuFeed } from "./sku-feed.js";
import { walkAndPlan } from "./list-walk.js";
import { runWorker } from "./sku-work.js";
import { decideOutcome, type Outcome } from "./outcome.js";
import { ceilingHint } from "./ceiling-hint.js";

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

/** What a run did; its request counters are the ones stored with the run (store/runs.ts). */
export interface SyncResult extends RunCounters {
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
  durationMs: number;
  /** Time, outside pauses, with every request the ceiling (`concurrency`) allows in flight (scheduler.ts). */
  ceilingHeldMs: number;
  /** Time, with no 429 yet, with every request the count sized for an unknown quota allows in flight, work waiting (scheduler.ts: unpacedHeldMs). */
  unpacedHeldMs: number;
  /**
   * Requests granted and then held back at the write because a 429 or 503 had just been read (scheduler.ts:
   * heldAtWrite): sent after the pause, not counted in `requests` or `retries`.
   */
  heldAtWrite: number;
  /** Said when that ceiling, not the server's quota, held the run back (ceiling-hint.ts); null otherwise. */
  ceilingHint: string | null;
  resumeAfter: string | null;
  /** Why the run did not succeed. */
  error: Error | null;
}

/** Ids buffered between the list walk and the workers. */
const QUEUE_CAPACITY = 2_000;
/**
 * SKUs in workers' hands beyond the requests allowed in flight and those waiting out a backoff of
 * their own (their slots go to others meanwhile): a SKU between two requests (its answer parsed,
 * checked, saved) holds no request slot, and the next SKU should be ready to send.
 */
const SKUS_BEYOND_IN_FLIGHT = 4;
/** How often run counters are written while a run is going. */
const COUNTER_FLUSH_MS = 2_000;

/** What the API's scheduler and client take besides the config and the key. */
export interface ApiOptions {
  onEvent?: (e: SchedulerEvent) => void;
  clock?: Clock;
  /** A quota wall from the last run (epoch ms). */
  pausedUntil?: number;
  /** What the last run against this server learned of its quota. */
  startFrom?: KeptQuota;
  logger?: Logger;
}

/**
 * The server a quota is learned for: origin and path prefix. A base URL never carries credentials
 * (config refuses userinfo), so this names no key, in a message or in the database.
 */
function serverOf(config: ResolvedConfig): string {
  if (!config.baseUrl) {
    throw new SyncError("no base URL: set --base-url, INVENTORY_BASE_URL or baseUrl in the config file (try 'inventory-mirror simulate' for a local one)");
  }
  return (config.baseUrl.origin + config.baseUrl.pathname).replace(/\/+$/, "");
}

/** Workers, scheduler and client for one process, from the resolved config. */
export function createApi(config: ResolvedConfig, key: Secret, o: ApiOptions = {}) {
  const server = serverOf(config);
  const { onEvent, clock, pausedUntil, startFrom, logger } = o;
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
    server,
    ...(pausedUntil ? { pausedUntil } : {}),
    ...(startFrom ? { startFrom } : {}),
    ...(clock ? { clock } : {}),
    ...(onEvent ? { onEvent } : {}),
  });
  const client = new ApiClient({
    baseUrl: config.baseUrl!,
    key,
    scheduler,
    http: { ...config.http, connections: config.concurrency },
    transport: poolTransport,
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
  // UUIDs are case-insensitive (RFC 9562): a server may send upper case where the id was configured in lower.
  const wrongId = config.expectedWorkspace.id !== null && ws.workspace.id.toLowerCase() !== config.expectedWorkspace.id.toLowerCase();
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
  const journal = new RunJournal();
  // A fatal error in one worker stops the others; the caller's signal and the run's deadline do too.
  const stop = new RunStop(opts.signal, config.sync.maxRunSeconds * 1000);
  let store: Store | null = null;
  let walGuard: WalGuard | null = null;
  let api: ReturnType<typeof createApi> | null = null;
  try {
    // What the file already says, read without writing: its workspace, a quota wall still in force, and the quota the last run learned.
    const server = serverOf(config);
    const peek = peekDatabase(config.db, Date.now(), server);
    const pausedUntil = quotaWallToHonour(peek?.resumeAfter ?? null, opts, journal);
    const startFrom = learnedQuotaToStartFrom(peek?.learnedQuota ?? null, opts, journal);
    api = createApi(config, opts.key, { onEvent: (e) => journal.onSchedulerEvent(e, logger), clock: opts.clock, pausedUntil, startFrom, logger });
    const ws = await identifyWorkspace(api.client, config, peek, stop.signal);

    const db = openDatabase(config.db);
    store = new Store(db);
    // BI readers may hold the WAL; the guard keeps it under the cap without blocking us.
    walGuard = startWalGuard(db, { capBytes: Math.round(config.storage.walCapMegabytes * 1048576), intervalMs: config.storage.walCheckIntervalMs });
    tuneWriter(db, Math.round(config.storage.walCapMegabytes * 1048576));
    store.bindWorkspace(ws);
    const run = store.startRun(opts.mode);
    journal.attach(store, run.id);
    logRunStart(opts, run);

    const result = await executeRun(createRunContext({ opts, run, store, api, workspace: ws.workspace, stop }));
    result.durationMs = Date.now() - started;
    return result;
  } finally {
    stop.dispose();
    await api?.client.close().catch(() => {});
    walGuard?.stop();
    try {
      store?.flushGroup();
    } finally {
      store?.close();
    }
    lock.release();
  }
}

/**
 * The pause a quota wall stored by the last run imposes on the scheduler (undefined: none).
 * With `--ignore-quota-wall` the run starts anyway, and the journal says so.
 */
function quotaWallToHonour(wall: number | null, opts: SyncOptions, journal: RunJournal): number | undefined {
  if (wall === null) return undefined;
  if (!opts.ignoreQuotaWall) return wall;
  const message = `quota wall until ${new Date(wall).toISOString()} ignored (--ignore-quota-wall)`;
  opts.logger.warn({ resumeAfter: new Date(wall).toISOString() }, message);
  journal.write({ kind: "info", message });
  return undefined;
}

/**
 * The quota the last run against this server learned, to start from (undefined: find it afresh). Not
 * when the rate is not adaptive (only the user's ceiling applies then). The journal says where the rate
 * comes from: a run that starts paced, with no 429 of its own, would otherwise not explain its rate.
 */
function learnedQuotaToStartFrom(kept: KeptQuotaRow | null, opts: SyncOptions, journal: RunJournal): KeptQuota | undefined {
  if (!kept || !opts.config.rateLimit.adaptive) return undefined;
  const { quota, runId, learnedAt } = kept;
  const ago = Math.max(0, Math.round((Date.now() - Date.parse(learnedAt)) / 60_000));
  const above = quota.high === null ? "" : ` (a 429 came at ${quota.high.toFixed(1)})`;
  const message = `starting at ${quota.low.toFixed(1)} req/s: the quota run ${runId} learned ${ago} min ago${above}; a 429 at that rate finds the quota afresh, but one on the first request or on a bucket of one token is excused once`;
  opts.logger.info({ learnedByRun: runId, requestsPerSecond: quota.low }, message);
  journal.write({ kind: "rate", message });
  return quota;
}

/** Who is this key for? Nothing is written before this and the database check pass. */
async function identifyWorkspace(client: ApiClient, config: ResolvedConfig, peek: ReturnType<typeof peekDatabase>, signal: AbortSignal): Promise<WorkspaceResponse> {
  const ws = await client.workspace(signal);
  checkExpectedWorkspace(ws, config);
  if (peek?.workspace && peek.workspace.id !== ws.workspace.id) throw databaseBelongsToAnother(peek.workspace, ws.workspace);
  return ws;
}

function logRunStart({ mode, logger }: SyncOptions, run: RunState): void {
  if (run.mode !== mode)
    logger.info({ runId: run.id, resumedFrom: run.resumedFrom }, `an unfinished ${run.mode} walk (run ${run.resumedFrom}) is resumed first: this run finishes it as a ${run.mode} run`);
  logger.info({ runId: run.id, mode: run.mode, walkId: run.walkId, resumedFrom: run.resumedFrom }, run.resumedFrom ? "resuming an unfinished walk" : "sync started");
}

function createRunContext(p: { opts: SyncOptions; run: RunState; store: Store; api: ReturnType<typeof createApi>; workspace: { id: string; name: string }; stop: RunStop }): RunContext {
  const incremental = p.run.mode === "incremental";
  return {
    run: p.run,
    store: p.store,
    client: p.api.client,
    scheduler: p.api.scheduler,
    config: p.opts.config,
    logger: p.opts.logger,
    progress: p.opts.progress,
    workspace: p.workspace,
    incremental,
    planner: incremental ? planIncremental(p.run) : planFull(p.run),
    deleteAfterMisses: incremental ? 2 : 1,
    stop: p.stop,
    feed: new SkuFeed(QUEUE_CAPACITY, p.stop.signal, () => p.api.scheduler.inFlightLimit + p.api.scheduler.requestsWaitingAlone + SKUS_BEYOND_IN_FLIGHT),
    tally: newTally(),
  };
}

/**
 * The run itself: the list walk (the producer) and the workers side by side, joined by the
 * feed; then the outcome, decided from what stopped the run, and written.
 */
async function executeRun(ctx: RunContext): Promise<SyncResult> {
  const { store, run, config, logger, tally } = ctx;
  // A backfill into an empty history builds the history's BI indexes once, at the end (store.ts).
  if (store.deferHistoryIndexes(run)) logger.info({ runId: run.id }, "backfill: the history's secondary indexes are built once the walk ends");
  tally.alreadyDone = run.resumedFrom ? store.countFetchedInWalk(run.walkId) : 0;
  const flushCounters = () => store.saveRunCounters(run.id, runCounters(ctx.scheduler));
  const flushTimer = setInterval(flushCounters, COUNTER_FLUSH_MS);
  flushTimer.unref();
  reportProgress(ctx);
  try {
    await Promise.all([walkAndPlan(ctx), ...Array.from({ length: config.concurrency }, () => runWorker(ctx))]);
  } finally {
    clearInterval(flushTimer);
  }
  store.flushGroup();
  flushCounters();
  store.saveRunPlan(run.id, { ...tally.plan, budget: config.sync.maxRequests });

  const { stop } = ctx;
  const outcome = decideOutcome({ fatal: stop.fatal, stopReason: stop.reason, interrupted: stop.interrupted, failed: tally.failed, maxRequests: config.sync.maxRequests });
  const hint = ceilingHint(ctx.scheduler.ceilingReport());
  if (hint) {
    logger.warn({ runId: run.id, concurrency: config.concurrency }, hint);
    store.journal(run.id, { kind: "rate", message: hint });
  }
  finishRun(ctx, outcome);
  return { ...syncResult(ctx, outcome), ceilingHint: hint };
}

function runCounters(scheduler: RequestScheduler): RunCounters {
  const { stats } = scheduler;
  return {
    requests: stats.requests,
    requestsByEndpoint: stats.byEndpoint,
    requestsByStatus: stats.byStatus,
    responses429: stats.responses429,
    responses503: stats.unavailable,
    retries: stats.retries,
    waitMs: stats.waitMs,
  };
}

/** The run's end in the database: the outcome's journal entries, the deferred history indexes, the run's row. */
function finishRun(ctx: RunContext, outcome: Outcome): void {
  const { store, run, logger } = ctx;
  for (const e of outcome.journal) store.journal(run.id, e);
  if (outcome.status !== "interrupted") {
    // Interrupted runs leave it to the next run, so a SIGTERM is never held up by an index build.
    const t0 = Date.now();
    const built = store.restoreHistoryIndexes();
    if (built) logger.info({ runId: run.id, indexes: built, ms: Date.now() - t0 }, "history indexes built");
  }
  store.finishRun(run.id, outcome.status, outcome.error ? describeError(outcome.error) : null, outcome.resumeAfter);
  keepQuotaLesson(ctx);
  const { retentionDays, retentionMaxChanges } = ctx.config.feed;
  const pruned = store.pruneChanges({ maxAgeMs: retentionDays * 24 * 60 * 60_000, maxRows: retentionMaxChanges });
  if (pruned) logger.info({ runId: run.id, changes: pruned }, "change feed pruned (feed.retentionDays, feed.retentionMaxChanges)");
  logger.info({ runId: run.id, status: outcome.status, plan: ctx.tally.plan }, `sync ${outcome.status}`);
}

/** What the run learned of the quota, kept for the next run against this server (or what was kept, forgotten). */
function keepQuotaLesson(ctx: RunContext): void {
  const lesson = ctx.scheduler.quotaLesson();
  if (lesson.kind === "nothing") return;
  const server = serverOf(ctx.config);
  if (lesson.kind === "learned") ctx.store.keepLearnedQuota(server, ctx.run.id, lesson.quota);
  else ctx.store.forgetLearnedQuota(server);
}

function syncResult(ctx: RunContext, outcome: Outcome): SyncResult {
  const { run, tally, scheduler } = ctx;
  return {
    runId: run.id,
    mode: run.mode,
    status: outcome.status,
    resumedFrom: run.resumedFrom,
    workspace: ctx.workspace,
    skusListed: tally.listed,
    skusPlanned: tally.planned,
    plan: tally.plan,
    skusFetched: tally.fetched,
    skusFailed: tally.failed,
    skusDeleted: tally.deleted,
    locations: tally.locations,
    historyRowsAdded: tally.rowsAdded,
    historyDeepWalks: tally.deepWalks,
    repolledDetailOnly: tally.detailOnly,
    requests: scheduler.stats.requests,
    requestsByEndpoint: { ...scheduler.stats.byEndpoint },
    requestsByStatus: { ...scheduler.stats.byStatus },
    responses429: scheduler.stats.responses429,
    responses503: scheduler.stats.unavailable,
    retries: scheduler.stats.retries,
    waitMs: scheduler.stats.waitMs,
    durationMs: 0,
    ceilingHeldMs: Math.round(scheduler.stats.ceilingHeldMs),
    unpacedHeldMs: Math.round(scheduler.stats.unpacedHeldMs),
    heldAtWrite: scheduler.stats.heldAtWrite,
    ceilingHint: null,
    resumeAfter: outcome.resumeAfter,
    error: outcome.error,
  };
}
