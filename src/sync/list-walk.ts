/**
 * The producer side of a run: the locations tree, what a resumed walk had left queued, the
 * list walk (each page saved with its plan and checkpoint, the planned SKUs fed to the
 * workers), then, in an incremental run, the SKUs due for re-verification.
 */
import { DEFAULTS } from "../core/defaults.js";
import { totalsOfPageOne, walkList, type ListPage } from "./walker.js";
import { confirmGone } from "./sku-work.js";
import { queueReverification } from "./reverify.js";
import type { RunContext } from "./run-context.js";
import type { Planner } from "./planner.js";
import type { RunState, Store } from "../store/store.js";

/** Everything the workers are to fetch in this run, queued in order; the feed is closed at the end, whatever happens. */
export async function walkAndPlan(ctx: RunContext): Promise<void> {
  const { run, stop, feed, tally } = ctx;
  try {
    await saveLocationTree(ctx);
    // A resumed walk first finishes the SKUs its predecessor had queued, stalest first.
    if (run.resumedFrom) for (const id of ctx.store.pendingSkus(run.walkId)) await feed.offer(id);
    let walkedAgain = false;
    if (!run.listDone) {
      const walk = await walkListPages(ctx);
      if (walk === null) return;
      walkedAgain = walk.walkAgain;
      if (walkedAgain && !(await walkAgain(ctx, walk.counts))) return;
      if (ctx.incremental) await queueReverification(ctx);
    } else {
      await saveSnapshotOfPageOne(ctx);
      walkedAgain = run.listWalkAgain;
      if (walkedAgain && !(await walkAgain(ctx, null))) return;
      // The run it resumes was stopped during its walk again, before it queued its re-verification (which follows the walk).
      if (walkedAgain && ctx.incremental) await queueReverification(ctx);
    }
    // The progress line's total: what this run queued, once known. A full run's began as the first page's
    // count, which a walk again says moved (a SKU created behind the walk's position: 31 done of 30 shown).
    if (tally.total === null || walkedAgain) tally.total = tally.alreadyDone + feed.enqueued;
  } catch (err) {
    if (!stop.signal.aborted) stop.fail(err as Error);
  } finally {
    feed.close();
  }
}

async function saveLocationTree(ctx: RunContext): Promise<void> {
  const loc = await ctx.client.locations(ctx.stop.signal);
  ctx.tally.locations = ctx.store.saveLocations(ctx.run.id, loc.locations, ctx.deleteAfterMisses).seen;
}

/**
 * A run that resumes a walk whose list pages had all been saved walks no page, yet each run stores the
 * list's totals as its snapshot (totals-over-time charts them per run): they come from page one, one
 * request of one item.
 */
async function saveSnapshotOfPageOne(ctx: RunContext): Promise<void> {
  const totals = await totalsOfPageOne(ctx.client, ctx.stop.signal);
  ctx.store.saveSnapshot(ctx.run.id, totals.locations, totals.summary);
}

/** The workspace's SKU count (summary.skuCount) at the first and the last page this run fetched of a walk; null where a page had none. */
interface ListCounts {
  first: number | null;
  last: number | null;
}

/**
 * Every list page from the walk's checkpoint on, the counts its pages gave, and whether the list is to be
 * walked again (decided with the last page, walkAgain). Null when the run stopped before the walk's end.
 */
async function walkListPages(ctx: RunContext): Promise<{ counts: ListCounts; walkAgain: boolean } | null> {
  const { run, stop, tally } = ctx;
  let snapshotSaved = false;
  const counts: ListCounts = { first: null, last: null };
  let walkAgain = false;
  for await (const page of walkList(ctx.client, { limit: DEFAULTS.listPageSize, startCursor: run.listCursor }, stop.signal)) {
    if (page.restarted) {
      ctx.store.journal(run.id, { kind: "retry", endpoint: "list", message: "the server rejected a list cursor; the walk restarted from the first page" });
      ctx.logger.warn("the server rejected a list cursor; restarting the list walk from the first page");
      // The pages before count again as the walk lists them again: "listed" is what the walk that ends listed, not its listings.
      tally.listed = 0;
      ctx.store.listWalkRestarted(run.id);
    }
    // The root summaries and totals cover the whole result, so the first page's are the run's snapshot.
    if (!snapshotSaved) {
      ctx.store.saveSnapshot(run.id, page.roots, page.summary);
      snapshotSaved = true;
    }
    if (page.summary?.skuCount != null && tally.total === null && !ctx.incremental) tally.total = page.summary.skuCount;
    counts.first ??= page.summary?.skuCount ?? null;
    counts.last = page.summary?.skuCount ?? null;
    if (await savePageAndQueue(ctx, page, (listed) => countMoved(counts, listed))) walkAgain = true;
    if (stop.signal.aborted) return null;
  }
  return { counts, walkAgain };
}

/** The count a page of the walk gave differs from another page's, or from the SKUs the walk listed (walkAgain). */
function countMoved(counts: ListCounts, listed: number): boolean {
  return [counts.first, counts.last].some((c) => c !== null && c !== listed);
}

/**
 * A server paging by offset skips a SKU when one it listed is removed mid-walk (the SKUs after it move
 * up a place), and a SKU created mid-walk behind the position is not listed (docs/server-variance.md,
 * row 31). In a database that has the skipped SKU, the end of the walk asks for it (spareListedElsewhere);
 * in a fresh one nothing knew it, and a `sync --full` ended without it. So when the count the pages gave
 * changed under the walk, or differs from the SKUs it listed, the list is walked once more (a page per
 * `listPageSize` SKUs) and what it had not listed is saved and planned. Once: a SKU skipped by both walks
 * needs a second removal landing just so, and the next run's walk lists it anyway. A server whose pages
 * give no count is not walked again. The decision is stored with the walk's last page (Store.saveLastPage):
 * a run stopped during the walk again leaves it to the run that resumes the walk (`counts` null there:
 * they were this run's predecessor's), and it is cleared once done. False when the run stopped meanwhile.
 */
async function walkAgain(ctx: RunContext, counts: ListCounts | null): Promise<boolean> {
  const { run, stop, tally, store } = ctx;
  const listed = store.countListedInWalk(run.walkId);
  let found = 0;
  for await (const page of walkList(ctx.client, { limit: DEFAULTS.listPageSize, startCursor: null }, stop.signal)) {
    const { queued, unlisted } = await store.grouped(() => store.saveUnlisted(run, page.items, ctx.planner.reason));
    found += unlisted;
    tally.listed += unlisted;
    await queueForWorkers(ctx, queued);
    if (stop.signal.aborted) return false;
  }
  store.walkedAgain(run);
  const why = counts
    ? `${counts.first ?? "?"} SKUs at its first page, ${counts.last ?? "?"} at its last, ${listed} listed`
    : `found by run ${run.resumedFrom}, which stopped before walking it again; ${listed} listed`;
  const message = `the list changed under its walk (${why}): walked it again and found ${found} SKU${found === 1 ? "" : "s"} it had not listed`;
  store.journal(run.id, { kind: "info", endpoint: "list", message });
  ctx.logger.info({ found }, message);
  return true;
}

/**
 * One list page with its plan. The last page and the end of the walk (misses, deletions)
 * commit together (Store.saveLastPage): a run stopped after it must not leave list_done set
 * with the walk's deletions not applied, since a resumed run skips the list walk. `deleted`
 * is null before the last page.
 */
function savePlannedPage(store: Store, run: RunState, page: ListPage, planner: Planner, spared: ReadonlySet<string>, walkAgain: (listed: number) => boolean) {
  if (page.nextCursor !== null) return { queued: store.savePage(run, page.items, page.nextCursor, planner.reason), deleted: null, walkAgain: false };
  return store.saveLastPage(run, page.items, planner.reason, SKU_DELETE_AFTER_MISSES, spared, walkAgain);
}

/** One page saved with the planner's decisions, then the SKUs it planned fed to the workers. True when it was the last and the list is to be walked again. */
async function savePageAndQueue(ctx: RunContext, page: ListPage, walkAgain: (listed: number) => boolean): Promise<boolean> {
  const { store, run, tally } = ctx;
  // Before the last page ends the walk, the SKUs it would mark deleted are asked for (one request each).
  const spared = page.nextCursor === null ? await spareListedElsewhere(ctx, page) : new Set<string>();
  const saved = await store.grouped(() => savePlannedPage(store, run, page, ctx.planner, spared, walkAgain));
  // Added to: SKUs the workers found gone before the walk ended are in it already (recordSkuResult).
  if (saved.deleted !== null) tally.deleted += saved.deleted;
  tally.listed += page.items.length;
  ctx.logger.debug({ items: page.items.length, queued: saved.queued.length, last: page.nextCursor === null, listed: tally.listed }, "list page saved");
  await queueForWorkers(ctx, saved.queued);
  return saved.walkAgain;
}

/** The SKUs a page planned, counted and fed to the workers. */
async function queueForWorkers(ctx: RunContext, queued: ReadonlyArray<{ id: string; reason: keyof RunContext["tally"]["plan"]; again: boolean }>): Promise<void> {
  ctx.tally.planned += queued.length;
  for (const q of queued) {
    ctx.tally.plan[q.reason]++;
    await ctx.feed.offer(q.id, false, q.reason === "repolled", q.again);
  }
}

/**
 * Complete list walks a SKU must be missed in before it is marked deleted, in any run: one, because
 * its detail is asked first (a 404 confirms it, an answer spares it), so a cycle after a SKU's
 * removal the mirror no longer lists it. (Two, unconfirmed, in incremental runs before: a removed
 * SKU stayed current for a cycle.) Locations have no detail to ask: ctx.deleteAfterMisses.
 */
const SKU_DELETE_AFTER_MISSES = 1;

/** Detail requests in flight at once while confirming deletions (the scheduler paces them; this bounds the promises). */
const CONFIRM_BATCH = 32;

/**
 * Before the end of a walk marks SKUs deleted, each one's detail is asked (one request per
 * deletion): a 404 confirms it. A SKU whose detail still answers was skipped by the walk, not
 * removed (a server paging by offset skips an item when one ahead of the position is removed
 * mid-walk, docs/server-variance.md): it is spared, one miss short of deletion, and the next
 * walk asks again if it is still missing. One whose detail cannot be had now is spared too.
 */
async function spareListedElsewhere(ctx: RunContext, lastPage: ListPage): Promise<Set<string>> {
  const suspects = ctx.store.deletionSuspects(ctx.run, lastPage.items, SKU_DELETE_AFTER_MISSES);
  const spared = new Set<string>();
  for (let i = 0; i < suspects.length; i += CONFIRM_BATCH) {
    const batch = suspects.slice(i, i + CONFIRM_BATCH);
    const outcomes = await Promise.all(batch.map((id) => confirmGone(ctx, id)));
    for (const [k, gone] of outcomes.entries()) if (!gone) spared.add(batch[k]!);
  }
  for (const id of spared) {
    const message = "not listed in this walk, but its detail still answers (or could not be had): not marked deleted; the next walk asks again if it is still missing";
    ctx.store.journal(ctx.run.id, { kind: "info", endpoint: "list", skuId: id, message });
    ctx.logger.warn({ skuId: id }, message);
  }
  return spared;
}
