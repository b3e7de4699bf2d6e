/**
 * Server variance: the places where ../shared/inventory-api.md says "not shown" or leaves a
 * choice open, each one an option the simulator can take another way. Every option is
 * orthogonal to the others and its default is the simulator's own choice, so an empty
 * VarianceOptions is the simulator as it always was. src/simulator/profiles.ts names
 * bundles of them; docs/server-variance.md lists every open point and the test covering it.
 *
 * Two kinds of option, and what "equal to ground truth" means for each:
 * - Presentation (order, null vs absent, extra fields, cursor text, last-page marker, error
 *   codes, page size): the same data said another way. Ground truth does not change; a
 *   mirror must end up byte-for-byte the same as against the default server (it normalises
 *   absent to null, drops unknown fields, does not depend on order).
 * - Data (zero-quantity roots left out of locationQuantities, zero-quantity leaves shown in
 *   detail, other nodeKind / lastSourceKind / location status values, decimal quantities,
 *   upper-case UUIDs): the server says something else, and the mirror stores what it says.
 *   `sim.groundTruth()` applies the same transformation, so it keeps describing what the
 *   mirror should hold (e.g. no sku_root_quantities row for a root the server left out; a 0
 *   leaf row for a leaf it showed with 0; 0.30000000000000004 where the server sent it; ids
 *   in upper case).
 */
import { createHash } from "node:crypto";
import { CursorCodec, type CursorEndpoint, type HistoryKey, type ListKey, type OffsetKey } from "./cursor.js";
import type { EndpointName } from "../core/defaults.js";
import type { Paging } from "./api.js";
import type { DetailLocationIn, DetailResponseIn, GroundTruth, GroundTruthSku, HistoryRowIn, ListItemIn, ListResponseIn, LocationNodeIn } from "./types.js";

export interface VarianceOptions {
  /**
   * Order of list items: by id (default), by id descending, shuffled but stable (a keyed hash of the id), or
   * `quantity`: by total quantity, largest first, then by id. That order moves with the data: a SKU whose stock
   * changes during a walk moves across the cursor's position, listed twice or not at all (liveWrites.listJumps).
   */
  listOrder?: "id" | "reverse" | "shuffled" | "quantity";
  /** Order of the locations endpoint: pre-order tree (default) or children before their parents (reversed). */
  locationOrder?: "tree" | "children-first";
  /** Order of detail `locations`: by leaf id (default) or descending. */
  detailOrder?: "id" | "reverse";
  /** `page.nextCursor` on the last page: null (default), the key left out, "", or no `page` object at all. */
  lastCursor?: "null" | "absent" | "empty" | "no-page";
  /** Cursor text: base64url (default) or text with characters a URL must encode (`+/=&?%# ` and non-ASCII). */
  cursorStyle?: "opaque" | "url-hostile";
  /**
   * What a cursor holds: a keyset position (default: the last item's key, so a walk stays right
   * while the data changes under it) or an offset (how many items came before the next page): a
   * write landing ahead of the position shifts the next page, so an item or row comes twice
   * (added ahead) or is skipped (removed ahead). The same data while nothing changes. Presentation.
   */
  cursorPosition?: "keyset" | "offset";
  /** Null-valued fields: sent as null (default) or left out (every nullable key, nested too). */
  nulls?: "send" | "omit";
  /** Unknown extra fields on every object: top level, items, nested objects, history rows, error bodies. */
  extraFields?: boolean;
  /** Roots where the SKU has 0: in `locationQuantities` with 0 (default) or left out. Data. */
  zeroRoots?: "send" | "omit";
  /** Active leaves where the SKU never had stock: left out of detail (default) or shown with quantity 0. Data. */
  zeroLeaves?: "omit" | "send";
  /** nodeKind of sections / leaves, lastSourceKind, and the status of locations that are not active: the named values (default) or others. Data. */
  kinds?: "named" | "other";
  /** Error statuses and codes: the simulator's (default) or other codes, and 422 for bad parameters / cursors. */
  errors?: "named" | "other";
  /** The server serves at most this many items per page whatever `limit` asks (default: no cap). */
  maxPageSize?: number | null;
  /**
   * Quantities (`number` in the document): integers (default), or decimals: every quantity sent
   * (list totals and locationQuantities, root summaries and summary, detail quantities, history
   * quantity and observedQuantity) is the model's value x 0.1, each scaled where it is sent, so a
   * sum of scaled history deltas may differ from the scaled leaf quantity by float noise
   * (0.1 + 0.2 != 0.3). Data.
   */
  quantities?: "integer" | "decimal";
  /**
   * UUIDs the server sends (workspace, location, parent and path ids, root summaries' ids and
   * leafLocationIds, SKU and product ids, locationQuantities keys, history locationId / eventId /
   * setSessionId): lower case (default) or upper case. Paths and query parameters are accepted in
   * either case. Data.
   */
  idCase?: "lower" | "upper";
  /**
   * The first page of every list walk, and of the history walk of every third SKU, comes back
   * with `items: []` and a `nextCursor` leading to the real first page (a server that filters
   * after paging). Presentation.
   */
  emptyPages?: boolean;
  /** The list's `locations` and `summary` ("not paged") are sent on the first page only: left out of pages fetched with a cursor. Presentation. */
  summaryOnce?: boolean;
}

export type ResolvedVariance = Required<VarianceOptions>;

const DEFAULT_VARIANCE: ResolvedVariance = {
  listOrder: "id",
  locationOrder: "tree",
  detailOrder: "id",
  lastCursor: "null",
  cursorStyle: "opaque",
  cursorPosition: "keyset",
  nulls: "send",
  extraFields: false,
  zeroRoots: "send",
  zeroLeaves: "omit",
  kinds: "named",
  errors: "named",
  maxPageSize: null,
  quantities: "integer",
  idCase: "lower",
  emptyPages: false,
  summaryOnce: false,
};

const CHOICES: { [K in keyof ResolvedVariance]?: readonly unknown[] } = {
  listOrder: ["id", "reverse", "shuffled", "quantity"],
  locationOrder: ["tree", "children-first"],
  detailOrder: ["id", "reverse"],
  lastCursor: ["null", "absent", "empty", "no-page"],
  cursorStyle: ["opaque", "url-hostile"],
  cursorPosition: ["keyset", "offset"],
  nulls: ["send", "omit"],
  extraFields: [true, false],
  zeroRoots: ["send", "omit"],
  zeroLeaves: ["omit", "send"],
  kinds: ["named", "other"],
  errors: ["named", "other"],
  quantities: ["integer", "decimal"],
  idCase: ["lower", "upper"],
  emptyPages: [true, false],
  summaryOnce: [true, false],
};

function resolveVariance(v: VarianceOptions | undefined): ResolvedVariance {
  const out = { ...DEFAULT_VARIANCE };
  for (const [k, value] of Object.entries(v ?? {}) as Array<[keyof ResolvedVariance, unknown]>) {
    if (value === undefined) continue;
    if (!(k in DEFAULT_VARIANCE)) throw new RangeError(`unknown variance option "${k}"`);
    const allowed = CHOICES[k];
    if (allowed && !allowed.includes(value)) throw new RangeError(`variance.${k} must be one of ${allowed.join(", ")}, got ${JSON.stringify(value)}`);
    if (k === "maxPageSize" && value !== null && !(Number.isInteger(value) && (value as number) >= 1)) {
      throw new RangeError(`variance.maxPageSize must be an integer >= 1 or null, got ${JSON.stringify(value)}`);
    }
    (out as Record<string, unknown>)[k] = value;
  }
  return out;
}

// ---------------------------------------------------------------- list order

/** Above any total quantity the simulator holds (the `quantity` order's keys count down from it). */
const QUANTITY_KEY_BOUND = 1e12;

/** Sort key of a SKU id whose ascending order is the list order; null = by id itself. `totalOf`: a SKU's total quantity now (for `quantity`). */
export function listOrderKey(order: ResolvedVariance["listOrder"], seed: number, totalOf: (id: string) => number): ((id: string) => string) | null {
  switch (order) {
    case "quantity":
      // Largest first: ascending in (a bound above any total − the total), in thousandths, zero-padded to one width.
      return (id) => `${String(Math.round((QUANTITY_KEY_BOUND - totalOf(id)) * 1000)).padStart(24, "0")}${id}`;
    case "id":
      return null;
    case "reverse":
      // Each hex digit complemented: ascending complement = descending id.
      return (id) => id.replace(/[0-9a-f]/gi, (c) => (15 - parseInt(c, 16)).toString(16));
    case "shuffled":
      return (id) => createHash("sha256").update(`list order ${seed} ${id}`).digest("hex").slice(0, 16) + id;
  }
}

// ---------------------------------------------------------------- cursors

const HOSTILE_HEAD = "k=";
const HOSTILE_TAIL = "&n=+/ %?#é";

/** A cursor codec whose tokens carry characters a URL must encode; decodes only its own form. */
export class HostileCursorCodec extends CursorCodec {
  override encode(e: "list", f: string, k: ListKey | OffsetKey): string;
  override encode(e: "history", f: string, k: HistoryKey | OffsetKey): string;
  override encode(e: CursorEndpoint, f: string, k: ListKey | HistoryKey | OffsetKey): string {
    const inner = super.encode(e as "list", f, k as ListKey);
    // Standard base64 (with + / =) of the signed token, framed by & ? % # space and a non-ASCII letter.
    return `${HOSTILE_HEAD}${Buffer.from(inner).toString("base64")}${HOSTILE_TAIL}`;
  }
  override decode(token: string, e: "list", f: string): ListKey | OffsetKey | null;
  override decode(token: string, e: "history", f: string): HistoryKey | OffsetKey | null;
  override decode(token: string, e: CursorEndpoint, f: string): ListKey | HistoryKey | OffsetKey | null {
    if (!token.startsWith(HOSTILE_HEAD) || !token.endsWith(HOSTILE_TAIL)) return null;
    const b64 = token.slice(HOSTILE_HEAD.length, token.length - HOSTILE_TAIL.length);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64)) return null;
    return super.decode(Buffer.from(b64, "base64").toString("utf8"), e as "list", f);
  }
}

// ---------------------------------------------------------------- errors

const OTHER_ERRORS: Record<string, { status?: number; code: string }> = {
  invalid_parameter: { status: 422, code: "VALIDATION_FAILED" },
  invalid_cursor: { status: 422, code: "PAGINATION_TOKEN_INVALID" },
  not_found: { code: "RESOURCE_NOT_FOUND" },
  unauthorized: { code: "AUTH_TOKEN_REJECTED" },
  rate_limited: { code: "WORKSPACE_QUOTA_EXHAUSTED" },
  service_unavailable: { code: "UPSTREAM_TEMPORARILY_DOWN" },
  method_not_allowed: { code: "READ_ONLY_API" },
};

// ---------------------------------------------------------------- the shaper

/** What the shaper needs to know of the workspace: the location nodes, as the model has them. */
export interface ShaperWorkspace {
  locations(): { locations: LocationNodeIn[] };
}

const OTHER_NODE_KIND: Record<string, string> = { section: "zone", leaf: "bin" };
const OTHER_SOURCE_KIND: Record<string, string> = { event: "movement_event", set: "stocktake" };
/** Location status of a location that is not active, under `kinds: "other"` ("Other values are not enumerated"). */
const OTHER_STATUS = "archived";
/** `quantities: "decimal"`: every quantity sent is the model's value times this (0.1 has no exact binary form). */
const DECIMAL_SCALE = 0.1;

/** `emptyPages`: does this SKU's history walk start with an empty page? Every third SKU, by its (lower-case) id. */
export function emptyFirstHistoryPage(skuId: string): boolean {
  return Number.parseInt(skuId.slice(-6), 16) % 3 === 0;
}

export class Shaper implements Paging {
  private readonly v: ResolvedVariance;
  private leafCache: { all: LocationNodeIn[]; byId: Map<string, LocationNodeIn> } | null = null;

  constructor(
    v: VarianceOptions | ResolvedVariance | undefined,
    private readonly ws: ShaperWorkspace,
  ) {
    this.v = resolveVariance(v);
  }

  get options(): ResolvedVariance {
    return this.v;
  }

  /** The page size the server serves for a requested `limit` (Paging, api.ts). */
  size(limit: number): number {
    return this.v.maxPageSize === null ? limit : Math.min(limit, this.v.maxPageSize);
  }

  /** Do cursors carry an offset instead of a keyset position? (Paging, api.ts) */
  get byOffset(): boolean {
    return this.v.cursorPosition === "offset";
  }

  /** Does a walk of `endpoint` (history: of SKU `skuId`, lower case) start with an empty page whose cursor leads to the real first page? (Paging, api.ts) */
  emptyFirst(endpoint: "list" | "history", skuId: string | null): boolean {
    if (!this.v.emptyPages) return false;
    return endpoint === "list" || (skuId !== null && emptyFirstHistoryPage(skuId));
  }

  /** A UUID as this server sends it (the model's ids are lower case). */
  id(uuid: string): string {
    return this.v.idCase === "upper" ? uuid.toUpperCase() : uuid;
  }

  /** Status and code of an error the simulator reports. */
  error(status: number, code: string): { status: number; code: string } {
    if (this.v.errors === "named") return { status, code };
    const o = OTHER_ERRORS[code];
    return o ? { status: o.status ?? status, code: o.code } : { status, code: code.toUpperCase() };
  }

  /** An error body as this server sends it. */
  errorBody(code: string, message: string): unknown {
    const body: Record<string, unknown> = { error: { code, message } };
    if (this.v.extraFields) {
      (body.error as Record<string, unknown>).details = [{ hint: "see documentation", traceId: trace() }];
      body.requestId = trace();
    }
    return body;
  }

  /**
   * A success body of `endpoint` as this server sends it (data transformations, then
   * presentation). `hasCursor`: the request carried a cursor (a page after the first).
   */
  response(endpoint: EndpointName, body: unknown, scopeLocationId: string | null, hasCursor = false): unknown {
    const b = body as Record<string, unknown>;
    switch (endpoint) {
      case "workspace":
        this.workspace(b as { workspace: { id: string } });
        break;
      case "locations": {
        let nodes = (b.locations as LocationNodeIn[]).map((n) => this.node(n));
        if (this.v.locationOrder === "children-first") nodes = nodes.reverse();
        b.locations = nodes;
        break;
      }
      case "list":
        b.items = (b.items as ListItemIn[]).map((i) => this.item(i));
        this.listHead(b as ListResponseIn);
        if (this.v.summaryOnce && hasCursor) {
          delete b.locations;
          delete b.summary;
        }
        break;
      case "detail":
        this.detail(b as DetailResponseIn, scopeLocationId);
        if (this.v.detailOrder === "reverse") (b as DetailResponseIn).locations.reverse();
        break;
      case "history":
        b.items = (b.items as HistoryRowIn[]).map((r) => this.row(r));
        break;
    }
    if (b.page && typeof b.page === "object") {
      const page = b.page as Record<string, unknown>;
      if (page.nextCursor === null && this.v.lastCursor === "absent") delete page.nextCursor;
      if (page.nextCursor === null && this.v.lastCursor === "empty") page.nextCursor = "";
      if (page.nextCursor === null && this.v.lastCursor === "no-page") delete b.page;
    }
    // page.nextCursor's own rule decides it; every other null goes.
    if (this.v.nulls === "omit") omitNulls(b, (path) => path === "page.nextCursor");
    if (this.v.extraFields) addExtraFields(endpoint, b);
    return b;
  }

  /** Ground truth as this server would have the mirror hold it: the data transformations only. */
  truth(gt: GroundTruth): GroundTruth {
    if (!this.changesData()) return gt;
    return { ...gt, workspace: this.truthWorkspace(gt.workspace), locations: this.truthLocations(gt.locations), skus: gt.skus.map((s) => this.truthSku(s)) };
  }

  truthWorkspace<W extends { workspace: { id: string } }>(w: W): W {
    const out = { ...w, workspace: { ...w.workspace } };
    this.workspace(out);
    return out;
  }

  truthLocations(nodes: LocationNodeIn[]): LocationNodeIn[] {
    return nodes.map((n) => this.node({ ...n }));
  }

  truthSku(s: GroundTruthSku): GroundTruthSku {
    if (!this.changesData()) return s;
    const detail = {
      ...s.detail,
      sku: { ...s.detail.sku },
      locations: (s.detail.locations ?? []).map((l) => ({ ...l, freshness: l.freshness ? { ...l.freshness } : l.freshness })),
    };
    this.detail(detail, null);
    const unreflected: Record<string, number> = {};
    for (const [leaf, n] of Object.entries(s.unreflected)) unreflected[this.id(leaf)] = n;
    for (const l of detail.locations) if (!(l.id in unreflected)) unreflected[l.id] = 0;
    const item = this.item({ ...s.item, locationQuantities: { ...(s.item.locationQuantities ?? {}) } });
    return { ...s, item, detail, history: s.history.map((r) => this.row({ ...r })), unreflected };
  }

  private changesData(): boolean {
    const v = this.v;
    return v.zeroRoots !== "send" || v.zeroLeaves !== "omit" || v.kinds !== "named" || v.quantities !== "integer" || v.idCase !== "lower";
  }

  /** A quantity as this server sends it. */
  private qty(q: number): number {
    return this.v.quantities === "decimal" ? q * DECIMAL_SCALE : q;
  }

  /** A nullable quantity as this server sends it (null / absent stay so). */
  private optQty<T>(q: T): T {
    return (typeof q === "number" ? this.qty(q) : q) as T;
  }

  /** A nullable id as this server sends it. */
  private optId<T>(id: T): T {
    return (typeof id === "string" ? this.id(id) : id) as T;
  }

  private workspace(w: { workspace: { id: string } }): void {
    w.workspace.id = this.id(w.workspace.id);
  }

  private node(n: LocationNodeIn): LocationNodeIn {
    if (this.v.kinds === "other") {
      if (n.nodeKind && OTHER_NODE_KIND[n.nodeKind]) n.nodeKind = OTHER_NODE_KIND[n.nodeKind];
      if (typeof n.status === "string" && n.status !== "active") n.status = OTHER_STATUS;
    }
    if (this.v.idCase === "upper") {
      n.id = this.id(n.id);
      n.parentId = this.optId(n.parentId);
      if (n.pathIds) n.pathIds = n.pathIds.map((id) => this.id(id));
    }
    return n;
  }

  private item(i: ListItemIn): ListItemIn {
    if (this.v.zeroRoots === "omit" && i.locationQuantities) {
      for (const [root, q] of Object.entries(i.locationQuantities)) if (q === 0) delete i.locationQuantities[root];
    }
    if (this.v.quantities === "decimal" || this.v.idCase === "upper") {
      i.totalQuantity = this.qty(i.totalQuantity);
      if (i.locationQuantities) i.locationQuantities = Object.fromEntries(Object.entries(i.locationQuantities).map(([root, q]) => [this.id(root), this.qty(q)]));
      this.skuIds(i);
    }
    return i;
  }

  /** The id and product id of a list item or a detail's `sku`. */
  private skuIds(sku: { id: string; product?: { id?: string | null } | null }): void {
    if (this.v.idCase !== "upper") return;
    sku.id = this.id(sku.id);
    if (sku.product) sku.product = { ...sku.product, id: this.optId(sku.product.id) };
  }

  /** The list's root summaries and summary: their quantities and ids. */
  private listHead(b: ListResponseIn): void {
    for (const r of b.locations ?? []) {
      r.totalQuantity = this.optQty(r.totalQuantity);
      r.averageQuantityPerSku = this.optQty(r.averageQuantityPerSku);
      r.id = this.id(r.id);
      if (r.leafLocationIds) r.leafLocationIds = r.leafLocationIds.map((id) => this.id(id));
    }
    if (b.summary) {
      b.summary.totalQuantity = this.optQty(b.summary.totalQuantity);
      b.summary.averageQuantityPerSku = this.optQty(b.summary.averageQuantityPerSku);
    }
  }

  /** One history row: its quantities and ids. */
  private row(r: HistoryRowIn): HistoryRowIn {
    r.quantity = this.qty(r.quantity);
    r.observedQuantity = this.optQty(r.observedQuantity);
    r.locationId = this.id(r.locationId);
    r.eventId = this.optId(r.eventId);
    r.setSessionId = this.optId(r.setSessionId);
    return r;
  }

  private detail(d: DetailResponseIn, scopeLocationId: string | null): void {
    if (this.v.zeroLeaves === "send") {
      const shown = new Set(d.locations.map((l) => l.id));
      for (const leaf of this.activeLeaves()) {
        if (shown.has(leaf.id) || (scopeLocationId !== null && !(leaf.pathIds ?? []).includes(scopeLocationId))) continue;
        d.locations.push(zeroLeaf(leaf));
      }
      d.locations.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    }
    if (this.v.kinds === "other") {
      for (const l of d.locations) {
        const f = l.freshness;
        if (f?.lastSourceKind && OTHER_SOURCE_KIND[f.lastSourceKind]) f.lastSourceKind = OTHER_SOURCE_KIND[f.lastSourceKind];
      }
    }
    d.totalQuantity = this.qty(d.totalQuantity);
    d.selectedQuantity = this.optQty(d.selectedQuantity);
    this.skuIds(d.sku);
    for (const l of d.locations) {
      l.quantity = this.qty(l.quantity);
      if (this.v.idCase === "upper") {
        l.id = this.id(l.id);
        l.parentId = this.optId(l.parentId);
      }
    }
  }

  /** Active leaves (locations never change, so computed once). */
  private activeLeaves(): LocationNodeIn[] {
    if (!this.leafCache) {
      const all = this.ws.locations().locations.filter((n) => n.isLeaf && n.status === "active");
      this.leafCache = { all, byId: new Map(all.map((n) => [n.id, n])) };
    }
    return this.leafCache.all;
  }
}

function zeroLeaf(leaf: LocationNodeIn): DetailLocationIn {
  return {
    id: leaf.id,
    name: leaf.name ?? null,
    code: leaf.code ?? null,
    parentId: leaf.parentId ?? null,
    quantity: 0,
    freshness: { status: "clean", lastReplayedAt: null, lastSourceKind: null },
  };
}

/** Delete every null-valued key, recursively (arrays are walked, not changed), except where `keep(path)`. */
function omitNulls(v: unknown, keep: (path: string) => boolean, path = ""): void {
  if (Array.isArray(v)) {
    for (const x of v) omitNulls(x, keep, path);
    return;
  }
  if (typeof v !== "object" || v === null) return;
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    const p = path ? `${path}.${k}` : k;
    if (o[k] === null) {
      if (!keep(p)) delete o[k];
    } else omitNulls(o[k], keep, p);
  }
}

let traceNo = 0;
let responseNo = 0;
/** A value that differs on every response: an identity that includes it would never match twice. */
function trace(): string {
  return `t-${process.pid}-${++traceNo}`;
}

/**
 * Unknown fields of several JSON types on every object the document describes. Maps whose keys
 * are data (`options`, `locationQuantities`) are left alone: a key there would be a value.
 */
function addExtraFields(endpoint: EndpointName, b: Record<string, unknown>): void {
  const revision = ++responseNo;
  b.apiVersion = "v1.7.3";
  b._links = { self: { href: `/v1/external/${endpoint}` } };
  b.servedAt = new Date().toISOString();
  const extra = (o: unknown, tag: string): void => {
    if (typeof o !== "object" || o === null) return;
    const r = o as Record<string, unknown>;
    r[`x_${tag}`] = { note: "unknown to the client", n: 1, list: [1, "two", null], nested: { deeper: true } };
    r.revision = revision;
    r.archived = false;
    r.tags = [];
  };
  switch (endpoint) {
    case "workspace":
      extra(b.workspace, "workspace");
      break;
    case "locations":
      for (const n of b.locations as unknown[]) extra(n, "node");
      break;
    case "list":
      for (const r of (b.locations as unknown[] | undefined) ?? []) extra(r, "root");
      extra(b.summary, "summary");
      for (const i of b.items as Array<Record<string, unknown>>) {
        extra(i, "item");
        extra(i.product, "product");
      }
      break;
    case "detail": {
      extra(b.sku, "sku");
      extra((b.sku as Record<string, unknown> | undefined)?.product, "product");
      for (const l of b.locations as Array<Record<string, unknown>>) {
        extra(l, "location");
        extra(l.freshness, "freshness");
      }
      b.reservedQuantity = 0;
      break;
    }
    case "history":
      for (const r of b.items as Array<Record<string, unknown>>) {
        extra(r, "row");
        r.servedAt = b.servedAt;
      }
      break;
  }
  if (b.page) extra(b.page, "page");
  if (b.page) (b.page as Record<string, unknown>).hasMore = Boolean((b.page as Record<string, unknown>).nextCursor);
}
