/**
 * The saver: consumes validated records and writes them, one transaction per unit
 * of work (the locations tree, a list page, a SKU's detail + whole history), with
 * the checkpoint that describes the unit in the same transaction. A crash between
 * two units loses at most the unit in hand, and state and data never disagree.
 *
 * `Store` is the sync's one handle on the writer connection; the SQL lives in the
 * module of each unit of work:
 *   runs.ts            workspace, runs, counters, journal, quota wall
 *   list.ts            locations, list pages, end of a walk, snapshots, the walk's queue
 *   sku.ts             one SKU's detail + history, its failure or disappearance
 *   history-indexes.ts the history's BI indexes during a backfill
 *   group-commit.ts    units finished together share one COMMIT
 *   outbox.ts          the change feed each unit appends to, its consumers and retention
 *   status.ts          the read model of `status`, /readyz and /metrics (its own connections)
 */
import type { DetailResponse, HistoryRow, ListItem, ListResponse, LocationNode, WorkspaceResponse } from "../core/api-schemas.js";
import type { DB } from "./db.js";
import { GroupCommit } from "./group-commit.js";
import { HistoryIndexes } from "./history-indexes.js";
import { confirmFeedConsumer, Outbox, pruneChanges, registerFeedConsumer, type Retention } from "./outbox.js";
import { ListWriter, saveSnapshot, WalkQueue, type PlanDecision, type Queued } from "./list.js";
import { RunWriter, type JournalEntry, type KeptQuota, type RunCounters, type RunMode, type RunPlan, type RunState, type RunStatus } from "./runs.js";
import { SkuWriter, type HistoryCopyKey, type SkuSaved, type StoredReplayRow } from "./sku.js";

export { databaseBelongsToAnother, type JournalEntry, type RunCounters, type RunMode, type RunState, type RunStatus } from "./runs.js";
export type { PlanDecision } from "./list.js";
export { movedInWalk } from "./list.js";
export { copyId, historyCopies, historyRowKey, walkedAfter } from "./sku.js";

export class Store {
  private readonly runs: RunWriter;
  private readonly list: ListWriter;
  private readonly queue: WalkQueue;
  private readonly sku: SkuWriter;
  private readonly indexes: HistoryIndexes;
  private readonly group: GroupCommit;

  constructor(private readonly db: DB) {
    this.runs = new RunWriter(db);
    const outbox = new Outbox(db);
    this.list = new ListWriter(db, outbox);
    this.queue = new WalkQueue(db);
    this.sku = new SkuWriter(db, (runId, e) => this.runs.journal(runId, e), outbox);
    this.indexes = new HistoryIndexes(db);
    this.group = new GroupCommit(db);
  }

  /** Close the writer connection (after `flushGroup`); the run in hand, if any, is no longer this process's. */
  close(): void {
    this.runs.release();
    this.db.close();
  }

  // ---- group commit (group-commit.ts) ------------------------------------------------------------

  /** Run `unit` in the group transaction; resolves once it has committed (GroupCommit.grouped). */
  grouped<T>(unit: () => T): Promise<T> {
    return this.group.grouped(unit);
  }
  /** Commit the group transaction now, if one is open (before finishing a run or closing). */
  flushGroup(): void {
    this.group.flush();
  }

  // ---- workspace and runs (runs.ts) --------------------------------------------------------------

  /** Record the workspace; refuse (exit 4, nothing written) if the file belongs to another one. */
  bindWorkspace(ws: WorkspaceResponse): void {
    this.runs.bindWorkspace(ws);
  }
  /** Start a run, or resume the unfinished walk of the latest one (RunWriter.startRun). */
  startRun(mode: RunMode): RunState {
    return this.runs.startRun(mode);
  }
  saveRunCounters(runId: number, c: RunCounters): void {
    this.runs.saveRunCounters(runId, c);
  }
  saveRunPlan(runId: number, p: RunPlan): void {
    this.runs.saveRunPlan(runId, p);
  }
  finishRun(runId: number, status: RunStatus, error: string | null = null, resumeAfter: string | null = null): void {
    this.runs.finishRun(runId, status, error, resumeAfter);
  }
  journal(runId: number, e: JournalEntry): void {
    this.runs.journal(runId, e);
  }
  /** What the run learned of the server's quota, for the next run to start from (RunWriter.keepLearnedQuota), or forget what was kept. */
  keepLearnedQuota(server: string, runId: number, q: KeptQuota): void {
    this.runs.keepLearnedQuota(server, runId, q);
  }
  forgetLearnedQuota(server: string): void {
    this.runs.forgetLearnedQuota(server);
  }
  /** Epoch ms at which the incremental run before `runId` started, or null (the cadence of incremental runs). */
  previousIncrementalStart(runId: number): number | null {
    return this.runs.previousIncrementalStart(runId);
  }

  // ---- locations, list pages, snapshots (list.ts) ------------------------------------------------

  /** The locations tree is one response, so it is one unit: upsert all, mark the absent. */
  saveLocations(runId: number, nodes: LocationNode[], deleteAfterMisses: number): { seen: number; deleted: number } {
    return this.list.saveLocations(runId, nodes, deleteAfterMisses);
  }
  /** One list page with its walk checkpoint; `decide` (the planner) says which SKUs are queued and why. */
  savePage<R extends string>(run: RunState, items: ListItem[], nextCursor: string | null, decide: PlanDecision<R>): Array<Queued<R>> {
    return this.list.savePage(run, items, nextCursor, decide);
  }
  /** The last list page and the end of the walk (misses, deletions but the `spared`) as one unit. */
  saveLastPage<R extends string>(
    run: RunState,
    items: ListItem[],
    decide: PlanDecision<R>,
    deleteAfterMisses: number,
    spared?: ReadonlySet<string>,
    walkAgain?: (listed: number) => boolean,
  ): { queued: Array<Queued<R>>; deleted: number; walkAgain: boolean } {
    return this.list.saveLastPage(run, items, decide, deleteAfterMisses, spared, walkAgain);
  }
  /** Of a page of a walk of the list again, the SKUs this walk had not listed, saved and planned (ListWriter.saveUnlisted). */
  saveUnlisted<R extends string>(run: RunState, items: ListItem[], decide: PlanDecision<R>): { queued: Array<Queued<R>>; unlisted: number } {
    return this.list.saveUnlisted(run, items, decide);
  }
  /** The list's walk again is over (ListWriter.walkedAgain). */
  walkedAgain(run: RunState): void {
    this.list.walkedAgain(run);
  }
  /** The list walk restarted from page one: the run's listed count starts again (it counts the walk that ends). */
  listWalkRestarted(runId: number): void {
    this.list.listWalkRestarted(runId);
  }
  /** SKUs this walk has listed so far. */
  countListedInWalk(walkId: number): number {
    return this.list.countListedInWalk(walkId);
  }
  /** SKUs the end of this walk would mark deleted unless its last page lists them (ListWriter.deletionSuspects). */
  deletionSuspects(run: RunState, lastPage: readonly ListItem[], deleteAfterMisses: number): string[] {
    return this.list.deletionSuspects(run, lastPage, deleteAfterMisses);
  }
  /** The run's snapshot of the list's root summaries and overall summary (replaces an earlier one of the run). */
  saveSnapshot(runId: number, roots: ListResponse["locations"], summary: ListResponse["summary"]): void {
    saveSnapshot(this.db, runId, roots, summary);
  }

  // ---- the walk's queue (list.ts) ----------------------------------------------------------------

  /** SKUs still queued for this walk, stalest first, read a page at a time (WalkQueue.pendingSkus). */
  pendingSkus(walkId: number, pageSize?: number): Generator<string> {
    return this.queue.pendingSkus(walkId, pageSize);
  }
  /** Rotating re-verification: queue the `limit` SKUs of this walk fetched longest ago. */
  queueStalest(walkId: number, limit: number): string[] {
    return this.queue.queueStalest(walkId, limit);
  }
  /** Current SKUs whose detail and history were last stored before `isoTime` (or never). */
  countVerifiedBefore(isoTime: string): number {
    return this.queue.countVerifiedBefore(isoTime);
  }
  countCurrentSkus(): number {
    return this.queue.countCurrentSkus();
  }
  /** SKUs already stored in this walk (a resumed run counts them as done). */
  countFetchedInWalk(walkId: number): number {
    return this.queue.countFetchedInWalk(walkId);
  }

  // ---- one SKU (sku.ts) --------------------------------------------------------------------------

  /** A SKU's detail and its complete (or newest) history, as one unit (SkuWriter.saveSku). */
  saveSku(run: RunState, skuId: string, detail: DetailResponse, history: HistoryRow[], complete = false, opts: { historyWalked?: boolean } = {}): SkuSaved {
    return this.sku.saveSku(run, skuId, detail, history, complete, opts);
  }
  /** Detail/history kept failing: journal it; the SKU stays queued for the next run. */
  skuFailed(runId: number, skuId: string, endpoint: string | null, status: number | null, message: string): void {
    this.sku.skuFailed(runId, skuId, endpoint, status, message);
  }
  /** The server says the SKU does not exist (404 on detail, or on history then detail): it is gone, not failed. */
  skuVanished(runId: number, skuId: string, via: "detail" | "history" = "detail"): boolean {
    return this.sku.skuVanished(runId, skuId, via);
  }
  /** The stored history of a SKU, newest first, as much as a replay needs. */
  replayRows(skuId: string): StoredReplayRow[] {
    return this.sku.replayRows(skuId);
  }
  /** Does the detail show exactly the leaves, quantities and freshness stored for the SKU? */
  detailMatchesStored(skuId: string, detail: DetailResponse): boolean {
    return this.sku.detailMatchesStored(skuId, detail);
  }
  /** Is this copy of a history row stored for the SKU? */
  hasHistoryRow(skuId: string, key: HistoryCopyKey): boolean {
    return this.sku.hasHistoryRow(skuId, key);
  }

  // ---- the change feed (outbox.ts) ----------------------------------------------------------------

  /** Drop changes past retention (age, size), never past a registered consumer's confirmed seq; returns how many. */
  pruneChanges(retention: Retention): number {
    return pruneChanges(this.db, retention);
  }
  /** Register a feed consumer that retention waits for (idempotent); returns its confirmed seq. */
  registerFeedConsumer(name: string): number {
    return registerFeedConsumer(this.db, name);
  }
  /** The consumer has handled every change up to `seq`: retention may prune up to there. */
  confirmFeedConsumer(name: string, seq: number): void {
    confirmFeedConsumer(this.db, name, seq);
  }

  // ---- history indexes during a backfill (history-indexes.ts) ------------------------------------

  /** Drop the history's BI indexes for a backfill (true), or rebuild missing ones now (false). */
  deferHistoryIndexes(run: RunState): boolean {
    return this.indexes.defer(run);
  }
  /** Build whichever of the history's secondary indexes are missing; returns how many. */
  restoreHistoryIndexes(): number {
    return this.indexes.restore();
  }
}
