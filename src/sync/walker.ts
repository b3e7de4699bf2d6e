/**
 * Fetchers: async generators that yield validated records, page by page. They know
 * the API's paging rules and nothing about the database; the sync loop hands what
 * they yield to the store. Memory stays flat: one page at a time.
 */
import type { DetailResponse, HistoryRow, ListResponse } from "../core/api-schemas.js";
import { ApiError } from "../core/errors.js";
import type { ApiClient } from "../client/api-client.js";

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
export const MAX_WALK_RESTARTS = 3;

/** A 400/404/410/422 on a request that carried a cursor: the server no longer accepts it (expired, or state moved). */
export function isRejectedCursor(err: unknown, hadCursor: boolean): boolean {
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
    const next = page.page.nextCursor;
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
 * Every page of one SKU's history, newest first. A rejected cursor throws HistoryRestart;
 * a repeated cursor is a paging loop.
 */
export async function* walkHistory(
  client: ApiClient,
  skuId: string,
  opts: { limit: number },
  signal: AbortSignal,
): AsyncGenerator<HistoryRow[]> {
  let cursor: string | null = null;
  const seen = new Set<string>();
  for (;;) {
    let page;
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
    yield page.items;
    if (next === null) return;
    cursor = next;
  }
}

/** Thrown by walkHistory when a cursor was rejected: the caller starts the SKU's history again. */
export class HistoryRestart extends Error {
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
 */
export async function fetchSku(
  client: ApiClient,
  skuId: string,
  opts: { historyLimit: number; enough?: (rows: HistoryRow[], lastPage: HistoryRow[]) => boolean; detail?: DetailResponse },
  signal: AbortSignal,
): Promise<FetchedSku> {
  const detail = checkDetailFor(skuId, opts.detail ?? (await client.detail(skuId, signal)));
  for (let attempt = 0; ; attempt++) {
    const history: HistoryRow[] = [];
    let requests = 1;
    try {
      for await (const rows of walkHistory(client, skuId, { limit: opts.historyLimit }, signal)) {
        requests++;
        history.push(...rows);
        if (opts.enough?.(history, rows)) return { detail, history, requests, complete: false };
      }
      return { detail, history, requests, complete: true };
    } catch (err) {
      if (err instanceof HistoryRestart && attempt < MAX_WALK_RESTARTS) continue;
      if (err instanceof HistoryRestart) {
        throw new ApiError(`history (SKU ${skuId}): the server kept rejecting its own cursors`, { kind: "invalid-response", endpoint: "history" });
      }
      throw err;
    }
  }
}
