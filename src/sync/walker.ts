/**
 * Fetchers: async generators that yield validated records, page by page. They know
 * the API's paging rules and nothing about the database; the sync loop hands what
 * they yield to the store. Memory stays flat: one page at a time.
 */
import type { DetailResponse, HistoryRow, ListResponse } from "../core/api-schemas.js";
import { DEFAULTS } from "../core/defaults.js";
import { ApiError } from "../core/errors.js";
import type { ApiClient } from "../client/api-client.js";
import { createHash } from "node:crypto";

export interface ListPage {
  /** The cursor this page was requested with (null = first page). */
  cursor: string | null;
  items: ListResponse["items"];
  summary: ListResponse["summary"];
  roots: ListResponse["locations"];
  nextCursor: string | null;
  /** True on the first page after the walk was restarted because the server rejected a cursor. */
  restarted: boolean;
}

/** How many times a walk may restart from page one after a rejected cursor before giving up. */
const MAX_WALK_RESTARTS = 3;
/** Pages a list walk may take when no page says how many SKUs there are: a million SKUs at 100 per page. */
const UNCOUNTED_LIST_PAGES = 10_000;

/** A 400/404/410/422 on a request that carried a cursor: the server no longer accepts it (expired, or state moved). */
function isRejectedCursor(err: unknown, hadCursor: boolean): boolean {
  return hadCursor && err instanceof ApiError && err.kind === "http" && [400, 404, 410, 422].includes(err.status ?? 0);
}

/**
 * Every page of the unscoped list, starting at `startCursor` (a checkpoint) or page one.
 * A cursor the server rejects restarts the walk from page one, at most MAX_WALK_RESTARTS
 * times. A cursor that comes back twice is a server loop and ends the walk with an error.
 */
export async function* walkList(client: ApiClient, opts: { limit: number; startCursor: string | null }, signal: AbortSignal): AsyncGenerator<ListPage> {
  let cursor = opts.startCursor;
  let restarts = 0;
  let restarted = false;
  const seen = new Set<string>();
  let pages = 0;
  let knownCount: number | null = null;
  for (;;) {
    let page: ListResponse;
    try {
      page = await client.listPage({ cursor, limit: opts.limit }, signal);
    } catch (err) {
      if (isRejectedCursor(err, cursor !== null) && restarts < MAX_WALK_RESTARTS) {
        restarts++;
        cursor = null;
        restarted = true;
        seen.clear();
        continue;
      }
      throw err;
    }
    pages++;
    if (pages === 1 && cursor !== null && page.summary === null && page.locations.length === 0) page = { ...page, ...(await totalsOfPageOne(client, signal)) };
    const next = page.page.nextCursor;
    // Bounded by what the workspace's own count needs: an endless walk is a server loop, not data.
    knownCount = Math.max(knownCount ?? 0, page.summary?.skuCount ?? 0) || null;
    const allowed = knownCount === null ? UNCOUNTED_LIST_PAGES : Math.ceil(knownCount / opts.limit) + DEFAULTS.listPageMargin;
    if (next !== null && pages >= allowed) {
      throw new ApiError(`list: the server returned more than ${allowed} pages for ${knownCount ?? "an uncounted number of"} SKUs at ${opts.limit} per page (a paging loop); stopping the walk`, {
        kind: "invalid-response",
        endpoint: "list",
      });
    }
    if (next !== null) {
      if (seen.has(next) || next === cursor) {
        throw new ApiError(`list: the server returned a cursor it had already returned in this walk (a paging loop); stopping the walk`, {
          kind: "invalid-response",
          endpoint: "list",
        });
      }
      seen.add(next);
    }
    yield { cursor, items: page.items, summary: page.summary, roots: page.locations, nextCursor: next, restarted };
    restarted = false;
    if (next === null) return;
    cursor = next;
  }
}

/**
 * The list's root summaries and totals, from page one. They are not paged, and a server may send them
 * on the first page only (docs/server-variance.md row 26): a walk resumed at a checkpoint then had
 * none, and its run stored no snapshot and had no count to bound its pages by. One request of one item.
 */
export async function totalsOfPageOne(client: ApiClient, signal: AbortSignal): Promise<Pick<ListResponse, "summary" | "locations">> {
  const first = await client.listPage({ cursor: null, limit: 1 }, signal);
  return { summary: first.summary, locations: first.locations };
}

/** One page of a SKU's history; `last`: the server said no page follows. */
interface HistoryPage {
  rows: HistoryRow[];
  last: boolean;
}

/**
 * Every page of one SKU's history, newest first. A rejected cursor throws HistoryRestart;
 * a repeated cursor is a paging loop.
 */
async function* walkHistory(client: ApiClient, skuId: string, opts: { limit: number }, signal: AbortSignal): AsyncGenerator<HistoryPage> {
  let cursor: string | null = null;
  const seen = new Set<string>();
  let rows = 0;
  for (;;) {
    let page: Awaited<ReturnType<ApiClient["historyPage"]>>;
    try {
      page = await client.historyPage(skuId, { cursor, limit: opts.limit }, signal);
    } catch (err) {
      // The caller restarts the SKU's history from the newest page (bounded there).
      if (isRejectedCursor(err, cursor !== null)) throw new HistoryRestart();
      throw err;
    }
    const next = page.page.nextCursor;
    if (next !== null && (seen.has(next) || next === cursor)) {
      throw new ApiError(`history (SKU ${skuId}): the server returned a cursor it had already returned (a paging loop)`, {
        kind: "invalid-response",
        endpoint: "history",
      });
    }
    if (next !== null) seen.add(next);
    rows += page.items.length;
    if (rows > DEFAULTS.maxHistoryRowsPerSku) {
      throw new ApiError(
        `history (SKU ${skuId}): more than ${DEFAULTS.maxHistoryRowsPerSku.toLocaleString("en")} rows and the server keeps returning pages; the SKU fails for this run and is retried by a later one`,
        { kind: "invalid-response", endpoint: "history" },
      );
    }
    yield { rows: page.items, last: next === null };
    if (next === null) return;
    cursor = next;
  }
}

/** Thrown by walkHistory when a cursor was rejected: the caller starts the SKU's history again. */
class HistoryRestart extends Error {
  override name = "HistoryRestart";
}

export interface FetchedSku {
  detail: DetailResponse;
  history: HistoryRow[];
  requests: number;
  /** The history walk reached the oldest row (false: an incremental walk stopped at stored rows). */
  complete: boolean;
}

/** A SKU's detail alone (a re-poll), checked to be that SKU's. */
export async function fetchDetail(client: ApiClient, skuId: string, signal: AbortSignal): Promise<DetailResponse> {
  return checkDetailFor(skuId, await client.detail(skuId, signal));
}

function checkDetailFor(skuId: string, detail: DetailResponse): DetailResponse {
  if (detail.sku.id.toLowerCase() !== skuId.toLowerCase()) {
    throw new ApiError(`detail (SKU ${skuId}): the response is for SKU ${detail.sku.id}`, { kind: "invalid-response", endpoint: "detail" });
  }
  return detail;
}

/**
 * A SKU's detail and history, as one unit (nothing is written until all of it is here).
 * `enough(rowsSoFar)` lets an incremental sync stop paging once it has reached stored rows.
 *
 * A page that begins with the rows the page before ended with is walked again, detail and all:
 * a server whose cursors hold an offset shifts its next page when a write lands at the top of the
 * history mid-walk, and the repeated rows would be stored as identical copies the server does not
 * have (docs/server-variance.md, cursor position). Rows really identical across a page boundary
 * repeat the same way on the next walk, so a walk that meets an overlap it met before goes on.
 */
export async function fetchSku(
  client: ApiClient,
  skuId: string,
  opts: { historyLimit: number; enough?: (rows: HistoryRow[], lastPage: HistoryRow[]) => boolean; detail?: DetailResponse },
  signal: AbortSignal,
): Promise<FetchedSku> {
  let detail = checkDetailFor(skuId, opts.detail ?? (await client.detail(skuId, signal)));
  let requests = opts.detail ? 0 : 1;
  let restarts = 0;
  const overlaps = new PageOverlaps();
  for (;;) {
    const history: HistoryRow[] = [];
    let release: (() => void) | null = null;
    try {
      let previous: HistoryRow[] = [];
      for await (const { rows, last } of walkHistory(client, skuId, { limit: opts.historyLimit }, signal)) {
        requests++;
        overlaps.check(history, previous, rows);
        history.push(...rows);
        if (rows.length > 0) previous = rows;
        // The last page makes the walk complete, though it reached stored rows too: all of the server's history is in hand.
        if (!last && opts.enough?.(history, rows)) return { detail, history, requests, complete: false };
        // Past a long history, one SKU at a time: every worker may hold a short one, only one a long one.
        if (release === null && history.length >= DEFAULTS.longHistoryRows) release = await longHistorySlot.acquire(signal);
      }
      return { detail, history, requests, complete: true };
    } catch (err) {
      if (err instanceof HistoryShifted) {
        // The write that shifted the pages changed the detail too: both again, as one unit.
        detail = checkDetailFor(skuId, await client.detail(skuId, signal));
        requests++;
        continue;
      }
      if (err instanceof HistoryRestart && restarts++ < MAX_WALK_RESTARTS) continue;
      if (err instanceof HistoryRestart) {
        throw new ApiError(`history (SKU ${skuId}): the server kept rejecting its own cursors`, { kind: "invalid-response", endpoint: "history" });
      }
      throw err;
    } finally {
      release?.();
    }
  }
}

/** How many times one SKU's walk starts again for a new page overlap before it takes what it has (a SKU written to without pause). */
const MAX_SHIFT_REWALKS = 2;

/** Thrown when a page began with the rows the page before ended with, an overlap no walk of this SKU met before. */
class HistoryShifted extends Error {
  override name = "HistoryShifted";
}

/** The page overlaps one SKU's walks met: where (the rows up to and including the page) and how many rewalks they caused. */
class PageOverlaps {
  private readonly met = new Set<string>();
  private rewalks = 0;

  /**
   * Throws HistoryShifted when `page` begins with the rows `previous` ended with and this overlap is new.
   * The place is the count of rows before the page and the two pages' rows, not every row before: hashed
   * whole at each overlap, a server repeating one page without end took 95 s to reach the row bound
   * (1,000 pages, each slower than the last); now 2 s.
   */
  check(before: readonly HistoryRow[], previous: readonly HistoryRow[], page: readonly HistoryRow[]): void {
    if (this.rewalks >= MAX_SHIFT_REWALKS || pageOverlap(previous, page) === 0) return;
    const at = createHash("sha1").update(String(before.length));
    for (const r of previous) at.update(JSON.stringify(r));
    for (const r of page) at.update(JSON.stringify(r));
    const where = at.digest("hex");
    if (this.met.has(where)) return;
    this.met.add(where);
    this.rewalks++;
    throw new HistoryShifted();
  }
}

/**
 * How many rows `page` begins with that `previous` ended with, in the same order (0: none). Rows are
 * compared on every documented field; only rows sharing the first row's `occurredAt` are candidates.
 */
export function pageOverlap(previous: readonly HistoryRow[], page: readonly HistoryRow[]): number {
  const head = page[0];
  if (head === undefined) return 0;
  const same = (a: HistoryRow, b: HistoryRow) => a.occurredAt === b.occurredAt && JSON.stringify(a) === JSON.stringify(b);
  for (let i = 0; i < previous.length; i++) {
    const n = previous.length - i;
    if (n > page.length || !same(previous[i]!, head)) continue;
    let all = true;
    for (let t = 1; t < n && all; t++) all = same(previous[i + t]!, page[t]!);
    if (all) return n;
  }
  return 0;
}

/**
 * One slot for a history walk past DEFAULTS.longHistoryRows: the rows of a SKU are held until
 * its unit of work commits, so memory is bounded by workers × that threshold plus one long
 * walk (up to DEFAULTS.maxHistoryRowsPerSku), not workers × the bound.
 */
class Slot {
  private busy = false;
  private readonly waiting: Array<() => void> = [];
  async acquire(signal: AbortSignal): Promise<() => void> {
    while (this.busy) {
      if (signal.aborted) throw signal.reason;
      await new Promise<void>((resolve) => {
        const wake = () => {
          signal.removeEventListener("abort", wake);
          resolve();
        };
        this.waiting.push(wake);
        signal.addEventListener("abort", wake, { once: true });
      });
    }
    if (signal.aborted) throw signal.reason;
    this.busy = true;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.busy = false;
      this.waiting.shift()?.();
    };
  }
}
const longHistorySlot = new Slot();
