/**
 * The five endpoints as pure functions of (model, path, query): routing, parameter
 * validation, cursors. No HTTP here, so the server can wrap it with auth, quota and
 * faults, and the statuses for cases the document leaves open are decided in one place:
 *
 * - malformed parameter (non-UUID id, limit outside 1..100, unknown stockState) → 400 invalid_parameter
 * - unknown SKU or location id → 404 not_found
 * - forged, garbled or filter-mismatched cursor → 400 invalid_cursor
 */
import { UUID_RE } from "../core/api-schemas.js";
import type { EndpointName } from "../core/defaults.js";
import { CursorCodec, type HistoryKey } from "./cursor.js";
import { STOCK_STATES, type SimModel, type StockState } from "./model.js";
import { SimApiError, type DetailResponseIn, type HistoryResponseIn, type ListResponseIn, type LocationsResponseIn, type WorkspaceResponseIn } from "./types.js";

export interface Route {
  endpoint: EndpointName;
  /** Path parameter of detail / history, as sent. */
  skuId: string | null;
}

const API_ROOT = "/v1/external/";

/** Match a path (with the prefix already removed) to an endpoint; null for anything else. */
export function matchRoute(path: string): Route | null {
  if (!path.startsWith(API_ROOT)) return null;
  const parts = path.slice(API_ROOT.length).split("/");
  if (parts.length === 1 && parts[0] === "workspace") return { endpoint: "workspace", skuId: null };
  if (parts.length === 1 && parts[0] === "locations") return { endpoint: "locations", skuId: null };
  if (parts[0] !== "inventory-status") return null;
  if (parts.length === 1) return { endpoint: "list", skuId: null };
  const skuId = safeDecode(parts[1]!);
  if (!skuId) return null;
  if (parts.length === 2) return { endpoint: "detail", skuId };
  if (parts.length === 3 && parts[2] === "history") return { endpoint: "history", skuId };
  return null;
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

export type ApiBody = WorkspaceResponseIn | LocationsResponseIn | ListResponseIn | DetailResponseIn | HistoryResponseIn;

/** How this server pages (server variance, variance.ts): the default is the simulator's own. */
export interface Paging {
  /** How many items a page holds for a requested `limit` (a server may cap it). */
  size(limit: number): number;
  /** Does a walk (history: of this SKU, lower case) start with `items: []` and a cursor to the real first page? */
  emptyFirst(endpoint: "list" | "history", skuId: string | null): boolean;
  /** Do cursors carry an offset (how many items came before) instead of a keyset position? */
  readonly byOffset: boolean;
}

const OWN_PAGING: Paging = { size: (limit) => limit, emptyFirst: () => false, byOffset: false };

/** The keyset position before everything: the cursor of an empty first page leads to the real first page. */
const LIST_START = { id: "" };
const HISTORY_START = { t: Number.MAX_SAFE_INTEGER, s: Number.MAX_SAFE_INTEGER };

export function handleApi(model: SimModel, cursors: CursorCodec, route: Route, query: URLSearchParams, paging: Paging = OWN_PAGING): ApiBody {
  switch (route.endpoint) {
    case "workspace":
      return model.workspace();
    case "locations":
      return model.locations();
    case "list":
      return list(model, cursors, query, paging);
    case "detail":
      return model.detail(skuIdOf(route), scopeOf(model, query));
    case "history":
      return history(model, cursors, route, query, paging);
  }
}

function list(model: SimModel, cursors: CursorCodec, query: URLSearchParams, paging: Paging): ListResponseIn {
  const scopeLocationId = scopeOf(model, query);
  const q = query.get("q") ?? "";
  const stockState = (query.get("stockState") ?? "all") as StockState;
  if (!STOCK_STATES.includes(stockState)) throw invalid(`stockState must be one of ${STOCK_STATES.join(", ")}`);
  const limit = paging.size(limitOf(query, 50));
  // q is bound case-insensitively: matching is, so "Shirt" and "shirt" walk the same list.
  const f = CursorCodec.fingerprint({ e: "list", scope: scopeLocationId, q: q.toLowerCase(), stockState });
  const cursor = query.get("cursor");
  let after: string | null = null;
  let offset: number | undefined;
  if (cursor) {
    const key = cursors.decode(cursor, "list", f);
    if (!key) throw badCursor();
    if ("o" in key) offset = key.o;
    else after = key.id;
  } else if (paging.emptyFirst("list", null)) {
    // Nothing on this page (a server that filters after paging); root summaries and summary as on any first page.
    const head = model.listPage({ scopeLocationId, q, stockState }, null, 0);
    return { locations: head.locations, summary: head.summary, items: [], page: { nextCursor: cursors.encode("list", f, paging.byOffset ? { o: 0 } : LIST_START) } };
  }
  const page = model.listPage({ scopeLocationId, q, stockState }, after, limit, offset);
  const next = paging.byOffset ? (page.nextOffset === null ? null : { o: page.nextOffset }) : page.nextAfter === null ? null : { id: page.nextAfter };
  return {
    locations: page.locations,
    summary: page.summary,
    items: page.items,
    page: { nextCursor: next === null ? null : cursors.encode("list", f, next) },
  };
}

function history(model: SimModel, cursors: CursorCodec, route: Route, query: URLSearchParams, paging: Paging): HistoryResponseIn {
  const skuId = skuIdOf(route);
  const scopeLocationId = scopeOf(model, query);
  const limit = paging.size(limitOf(query, 20));
  const f = CursorCodec.fingerprint({ e: "history", skuId, scope: scopeLocationId });
  const cursor = query.get("cursor");
  let after: HistoryKey | null = null;
  let offset: number | undefined;
  if (cursor) {
    const key = cursors.decode(cursor, "history", f);
    if (!key) throw badCursor();
    if ("o" in key) offset = key.o;
    else after = key;
  } else if (paging.emptyFirst("history", skuId)) {
    model.historyPage(skuId, scopeLocationId, null, 0); // an unknown SKU is still a 404
    return { items: [], page: { nextCursor: cursors.encode("history", f, paging.byOffset ? { o: 0 } : HISTORY_START) } };
  }
  const page = model.historyPage(skuId, scopeLocationId, after, limit, offset);
  const next = paging.byOffset ? (page.nextOffset === null ? null : { o: page.nextOffset }) : page.nextAfter;
  return { items: page.items, page: { nextCursor: next ? cursors.encode("history", f, next) : null } };
}

function skuIdOf(route: Route): string {
  const id = route.skuId ?? "";
  if (!UUID_RE.test(id)) throw invalid(`skuId must be a UUID, got "${truncate(id)}"`);
  return id.toLowerCase();
}

function scopeOf(model: SimModel, query: URLSearchParams): string | null {
  const raw = query.get("scopeLocationId");
  if (raw === null) return null;
  if (!UUID_RE.test(raw)) throw invalid(`scopeLocationId must be a UUID, got "${truncate(raw)}"`);
  const id = raw.toLowerCase();
  if (!model.hasLocation(id)) throw new SimApiError(404, "not_found", `No location with id ${id}`);
  return id;
}

function limitOf(query: URLSearchParams, fallback: number): number {
  const raw = query.get("limit");
  if (raw === null) return fallback;
  const n = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= 100)) throw invalid(`limit must be an integer from 1 to 100, got "${truncate(raw)}"`);
  return n;
}

function invalid(message: string): SimApiError {
  return new SimApiError(400, "invalid_parameter", message);
}

function badCursor(): SimApiError {
  return new SimApiError(400, "invalid_cursor", "cursor is not valid for this request; restart from the first page with the same filters");
}

function truncate(s: string): string {
  return s.length > 60 ? `${s.slice(0, 60)}…` : s;
}
