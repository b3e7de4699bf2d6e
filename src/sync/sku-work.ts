/**
 * The consumer side of a run: workers that take queued SKUs and, for each, fetch its detail
 * and history and save them as one unit of work. One SKU ends in one explicit result, and
 * the worker records it: counts it, journals a failure or a vanished SKU, applies the
 * failure policy, or stops the run on a fatal error.
 */
import { DEFAULTS } from "../core/defaults.js";
import { ApiError, SyncError, type ApiErrorKind } from "../core/errors.js";
import type { DetailResponse, HistoryRow } from "../core/api-schemas.js";
import { copyId, historyCopies, historyRowKey, type Store, walkedAfter } from "../store/store.js";
import { unexplainedLeaves, type ReplayableRow } from "./history-check.js";
import { fetchDetail, fetchSku, type FetchedSku } from "./walker.js";
import { failedShare, tooManyFailures } from "./outcome.js";
import { reportProgress, reportWorkLeft, type RunContext } from "./run-context.js";
import type { QueuedSku } from "./sku-feed.js";

/** How one SKU ended in this run. */
export type SkuResult =
  /** Fetched and committed; `detailOnly` when a re-poll's detail showed nothing new (one request, history not walked). */
  | { kind: "saved"; rowsAdded: number; detailOnly: boolean }
  /** Its detail answered 404 (`via` history: its history did, and its detail, asked again, too): the SKU is gone from the server. */
  | { kind: "vanished"; via?: "history" }
  /** It could not be fetched this time; it stays queued and the next run retries it. */
  | { kind: "failed"; error: ApiError }
  /** An error that ends the run (a refused key, quota wall, spent budget, unreachable server, a local error). */
  | { kind: "fatal"; error: Error }
  /** The run was stopped while this SKU was in hand; nothing is recorded for it. */
  | { kind: "stopped" };

/** API errors that stop the whole run rather than one SKU. */
const FATAL_KINDS: ReadonlySet<ApiErrorKind> = new Set(["auth", "quota-wall", "budget", "unreachable"]);

/** One worker: takes queued SKUs until the feed is drained, the run stops, or it meets a fatal error. */
export async function runWorker(ctx: RunContext): Promise<void> {
  for (;;) {
    const next = await ctx.feed.take();
    if (next.done || ctx.stop.signal.aborted) return;
    const sku = next.value;
    const result = await syncSku(ctx, sku);
    const goOn = recordSkuResult(ctx, sku.id, result);
    ctx.feed.release(sku.id, result.kind === "saved");
    reportProgress(ctx);
    reportWorkLeft(ctx);
    if (!goOn) return;
  }
}

/** Fetch one SKU and save it; never throws: what went wrong is in the result. */
async function syncSku(ctx: RunContext, sku: QueuedSku): Promise<SkuResult> {
  try {
    return await fetchAndSave(ctx, sku);
  } catch (err) {
    const result = classifySkuError(err, ctx.stop.signal.aborted);
    // A SKU removed between its detail and its history: the history's 404 alone does not say so
    // (a server may have no history for a SKU it has), its detail's does. One request, on this race only.
    if (result.kind !== "failed" || result.error.endpoint !== "history" || result.error.status !== 404) return result;
    try {
      return (await confirmGone(ctx, sku.id)) ? { kind: "vanished", via: "history" } : result;
    } catch (again) {
      return classifySkuError(again, ctx.stop.signal.aborted);
    }
  }
}

/** True when the SKU's detail answers 404 (it is gone); an error that ends the run is thrown, any other answer is false. */
export async function confirmGone(ctx: RunContext, skuId: string): Promise<boolean> {
  try {
    await fetchDetail(ctx.client, skuId, ctx.stop.signal);
    return false;
  } catch (err) {
    const outcome = classifySkuError(err, ctx.stop.signal.aborted);
    if (outcome.kind === "fatal") throw outcome.error;
    return outcome.kind === "vanished";
  }
}

/** What an error met while fetching or saving one SKU means for the run. */
export function classifySkuError(err: unknown, runStopped: boolean): Exclude<SkuResult, { kind: "saved" }> {
  if (runStopped) return { kind: "stopped" };
  if (!(err instanceof ApiError) || FATAL_KINDS.has(err.kind)) return { kind: "fatal", error: err as Error };
  if (err.endpoint === "detail" && err.status === 404) return { kind: "vanished" };
  return { kind: "failed", error: err };
}

async function fetchAndSave(ctx: RunContext, sku: QueuedSku): Promise<SkuResult> {
  const { store, run } = ctx;
  // A re-poll costs one request when the detail shows nothing new (issue 10 §3).
  const polled = sku.repoll ? await fetchDetail(ctx.client, sku.id, ctx.stop.signal) : undefined;
  if (polled && store.detailMatchesStored(sku.id, polled) && historyAddsUp(store, sku.id, polled, [])) {
    await store.grouped(() => store.saveSku(run, sku.id, polled, [], false, { historyWalked: false }));
    return { kind: "saved", rowsAdded: 0, detailOnly: true };
  }
  const f = await fetchWithHistory(ctx, sku, polled);
  // Committed with whatever other workers finished in the same turn (one COMMIT for all);
  // awaited, so a worker never holds more than one uncommitted SKU.
  const saved = await store.grouped(() => store.saveSku(run, sku.id, f.detail, f.history, f.complete));
  ctx.logger.debug({ skuId: sku.id, historyRows: f.history.length, rowsAdded: saved.rowsAdded, requests: f.requests, complete: f.complete }, "SKU saved");
  return { kind: "saved", rowsAdded: saved.rowsAdded, detailOnly: false };
}

/**
 * Detail and history. An incremental run stops paging the history once it reaches stored
 * rows (historyStop), unless the SKU is being re-verified; when what it fetched does not add
 * up to the detail's quantities, a row arrived late, deeper than the lookback overlap, and the
 * whole history is walked (counted as a deep walk).
 */
async function fetchWithHistory(ctx: RunContext, sku: QueuedSku, polled: DetailResponse | undefined): Promise<FetchedSku> {
  const { store, client, stop } = ctx;
  const enough = ctx.incremental && !sku.fullHistory ? historyStop(store, sku.id, ctx.config.sync.historyOverlapRows) : undefined;
  const f = await fetchSku(client, sku.id, { historyLimit: DEFAULTS.historyPageSize, ...(enough ? { enough } : {}), ...(polled ? { detail: polled } : {}) }, stop.signal);
  if (f.complete || historyAddsUp(store, sku.id, f.detail, f.history)) return f;
  ctx.tally.deepWalks++;
  ctx.logger.debug({ skuId: sku.id }, "history does not add up to the detail's quantities: walking all of it");
  return fetchSku(client, sku.id, { historyLimit: DEFAULTS.historyPageSize, detail: f.detail }, stop.signal);
}

/** Count and journal one SKU's result; false when the worker is to stop. */
function recordSkuResult(ctx: RunContext, skuId: string, result: SkuResult): boolean {
  const { tally } = ctx;
  switch (result.kind) {
    case "saved":
      tally.fetched++;
      if (result.detailOnly) tally.detailOnly++;
      tally.rowsAdded += result.rowsAdded;
      return true;
    case "vanished":
      tally.vanished++;
      if (ctx.store.skuVanished(ctx.run.id, skuId, result.via ?? "detail")) tally.deleted++;
      return true;
    case "failed":
      recordFailure(ctx, skuId, result.error);
      return true;
    case "fatal":
      ctx.stop.fail(result.error);
      return false;
    case "stopped":
      return false;
  }
}

/** A failed SKU stays queued; too many of them (tooManyFailures) end the run. */
function recordFailure(ctx: RunContext, skuId: string, err: ApiError): void {
  const { tally, config } = ctx;
  tally.failed++;
  ctx.store.skuFailed(ctx.run.id, skuId, err.endpoint, err.status, err.message);
  ctx.logger.warn({ skuId, endpoint: err.endpoint, status: err.status }, `SKU failed: ${err.message}`);
  const planned = tally.planned + tally.alreadyDone;
  if (tooManyFailures(tally.failed, planned, config.sync.maxFailedShare)) {
    const share = failedShare(tally.failed, planned);
    ctx.stop.fail(new SyncError(`${tally.failed} SKUs failed (${(share * 100).toFixed(1)}% > sync.maxFailedShare ${config.sync.maxFailedShare * 100}%); last: ${err.message}`));
  }
}

/**
 * Incremental history: pages come newest first; stop once the walk has reached rows
 * already stored and then gone `overlap` known rows further, and past the whole group
 * of rows sharing the first known row's occurredAt (ties). The overlap catches rows
 * that arrived late with an older occurredAt, down to that depth. Not on a page that ends
 * with a row not stored (at the moment of its last row): the stored rows at that moment the
 * walk did not return may be on the next page or rewritten (walkedAfter cannot tell), and a
 * rewritten row's new version stored beside its old one is a copy the server does not have.
 */
function historyStop(store: Store, skuId: string, overlap: number): (rows: HistoryRow[], lastPage: HistoryRow[]) => boolean {
  let firstKnownAt: string | null = null;
  let knownAfter = 0;
  // Copies seen so far per content, so the nth identical row is known only if n copies are stored (historyCopies).
  const copies = new Map<string, number>();
  return (_rows, lastPage) => {
    let last: HistoryRow | undefined;
    const known: boolean[] = [];
    for (const r of lastPage) {
      const rowKey = historyRowKey(r);
      const dupIndex = copies.get(rowKey) ?? 0;
      copies.set(rowKey, dupIndex + 1);
      const stored = store.hasHistoryRow(skuId, { rowKey, dupIndex });
      known.push(stored);
      if (stored) {
        if (firstKnownAt === null) firstKnownAt = r.occurredAt;
        knownAfter++;
      }
      last = r;
    }
    if (firstKnownAt === null || knownAfter <= overlap || last === undefined || !(last.occurredAt < firstKnownAt)) return false;
    return endsKnown(lastPage, known);
  };
}

/** Are the page's rows at its last row's moment (to the millisecond, as walkedAfter counts ties) all stored? */
function endsKnown(page: readonly HistoryRow[], known: readonly boolean[]): boolean {
  const lastMs = Date.parse(page[page.length - 1]!.occurredAt);
  for (let i = page.length - 1; i >= 0; i--) {
    if (Date.parse(page[i]!.occurredAt) !== lastMs) break;
    if (!known[i]) return false;
  }
  return true;
}

/**
 * Do the newest pages just fetched, followed by the older rows already stored, explain the
 * detail's quantities? The fetched rows come first, in the server's order.
 */
function historyAddsUp(store: Store, skuId: string, detail: DetailResponse, fetched: HistoryRow[]): boolean {
  const rows: ReplayableRow[] = [...fetched];
  const fetchedKeys = new Set(historyCopies(fetched).map(copyId));
  // A stored row after the moment the walk saw everything from, and not among what it returned, is no longer the server's (walkedAfter).
  const after = walkedAfter(fetched);
  for (const r of store.replayRows(skuId)) if (!fetchedKeys.has(copyId(r)) && !after?.covers(r.occurredAt)) rows.push(r);
  return unexplainedLeaves(rows, detail).length === 0;
}
