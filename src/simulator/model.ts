/**
 * SimModel: the workspace state, the queries the endpoints answer, and the mutations
 * churn is made of. Usable without a server (createModel) for unit tests and benches.
 *
 * Every response (and the ground truth) is rendered by the same functions from the same
 * state, so the ground truth cannot disagree with what the endpoints send.
 */
import { randomChurn, type ChurnSummary } from "./churn.js";
import type { HistoryKey } from "./cursor.js";
import { generateWorkspace, makeProduct, searchText } from "./generate.js";
import { createRng, uuidDeriver, type Rng } from "./prng.js";
import { cleanProjection, insertionIndex, insertProjection, replay } from "./replay.js";
import {
  SimApiError,
  type DetailLocationIn,
  type DetailResponseIn,
  type GroundTruth,
  type GroundTruthSku,
  type HistoryRowIn,
  type ListItemIn,
  type LocationsResponseIn,
  type Projection,
  type RootSummaryIn,
  type Row,
  type SkuIn,
  type SkuState,
  type SummaryIn,
  type WorkspaceResponseIn,
  type WorkspaceState,
} from "./types.js";
import { EVENT_TYPES, SET_TYPE_CODE, type EventTypeKey, type FreshnessStatus } from "./vocabulary.js";

export interface ModelOptions {
  /** Default 42; the same seed and options give byte-identical data. */
  seed?: number;
  skus?: number;
  roots?: number;
  sectionsPerRoot?: number;
  leavesPerSection?: number;
  /** Mean history rows per SKU. */
  historyDepth?: number;
  workspaceName?: string;
  /** SKUs (creation ordinals 3, 4, ...) given a pair of history rows identical in every field: in one page, across the 100/101 page boundary, among ties (history-variance.ts). Default 0. */
  identicalRows?: number;
  /** SKUs (after those) given a run of ~150 history rows sharing one occurredAt, across page boundaries. Default 0. */
  tieRuns?: number;
  /** Clock for mutations (occurredAt of new rows); default Date.now. */
  now?: () => number;
}

export const MODEL_DEFAULTS = {
  seed: 42,
  skus: 200,
  roots: 2,
  sectionsPerRoot: 2,
  leavesPerSection: 3,
  historyDepth: 12,
  workspaceName: "Simulated Workspace",
  identicalRows: 0,
  tieRuns: 0,
} as const;

export type StockState = "all" | "in_stock" | "empty";
export const STOCK_STATES: readonly StockState[] = ["all", "in_stock", "empty"];

export interface ListFilter {
  scopeLocationId: string | null;
  /** Case-insensitive substring; "" = no text filter. */
  q: string;
  stockState: StockState;
}

export interface ListPage {
  locations: RootSummaryIn[];
  summary: SummaryIn;
  items: ListItemIn[];
  /** List key (the id, unless the order was changed) of the last item when another page follows, else null. */
  nextAfter: string | null;
  /** How many items of the current order come before the next page, when another page follows, else null. */
  nextOffset: number | null;
}

export interface HistoryPage {
  items: HistoryRowIn[];
  /** Keyset position of the last row when another page follows, else null. */
  nextAfter: HistoryKey | null;
  /** How many rows (of the scope, newest first) come before the next page, when another page follows, else null. */
  nextOffset: number | null;
}

/** Scope of a query: which active leaves count, and which roots are reported. */
interface Scope {
  key: string;
  /** 1 for each active leaf (by location index) inside the scope. */
  mask: Uint8Array;
  /** Root location indices in scope, in location order. */
  roots: number[];
  /** Position of each leaf's root in `roots` (by location index). */
  rootPos: Int32Array;
  /** Active leaf ids of each root in scope (same order as `roots`). */
  leafIds: string[][];
}

/** Everything a list request needs for one filter, rebuilt after any mutation. */
interface ListView {
  version: number;
  scope: Scope;
  skus: SkuState[];
  totals: number[];
  /** skus.length × scope.roots.length quantities, row-major. */
  rootQty: Float64Array;
  locations: RootSummaryIn[];
  summary: SummaryIn;
}

const MAX_CACHED_VIEWS = 64;
const NOT_CLEAN: readonly FreshnessStatus[] = ["dirty", "rebuilding", "failed"];

export function createModel(opts: ModelOptions = {}): SimModel {
  return new SimModel(opts);
}

export class SimModel {
  /** @internal The raw state; churn and tests of the simulator read it. */
  readonly state: WorkspaceState;
  readonly seed: number;
  private readonly now: () => number;
  private readonly scopes = new Map<string, Scope>();
  private readonly views = new Map<string, ListView>();
  /** Draws ids and names for SKUs added after generation (deterministic in call order). */
  private readonly mutationRng: Rng;
  private churnRuns = 0;
  /** SKUs removed, kept so a test can bring one back (`reviveSku`). */
  private readonly removed = new Map<string, SkuState>();
  /** Event / SET-session ids are derived from (seed, SKU ordinal, event ordinal), not stored. */
  private readonly eventUuid: (skuIdx: number, ref: number) => string;
  private readonly sessionUuid: (skuIdx: number, ref: number) => string;
  /** Bumped by every mutation; list views built for an older version are stale. */
  private revision = 0;
  /** List order as a sort key of the SKU id (ascending key = list order); null = by id (server variance). */
  private listKey: ((id: string) => string) | null = null;
  private ordered: { version: number; skus: SkuState[] } | null = null;

  constructor(opts: ModelOptions = {}) {
    const o = { ...MODEL_DEFAULTS, ...stripUndefined(opts) };
    this.seed = o.seed;
    this.now = opts.now ?? Date.now;
    this.state = generateWorkspace(o);
    this.mutationRng = createRng(o.seed, "mutations");
    this.eventUuid = uuidDeriver(o.seed, "event");
    this.sessionUuid = uuidDeriver(o.seed, "set-session");
    this.buildScopes();
  }

  // ------------------------------------------------------------ queries

  workspace(): WorkspaceResponseIn {
    return { workspace: { ...this.state.workspace }, scope: "read" };
  }

  locations(): LocationsResponseIn {
    return {
      locations: this.state.locations.map((l) => ({
        ...l.node,
        pathIds: [...(l.node.pathIds ?? [])],
        pathNames: [...(l.node.pathNames ?? [])],
      })),
    };
  }

  /** Whether `id` is a location id (any kind or status): a valid scopeLocationId. */
  hasLocation(id: string): boolean {
    return id !== "" && this.scopes.has(id);
  }

  /** Changes with every mutation (a cheap "has anything changed?" check for callers). */
  get version(): number {
    return this.revision;
  }

  /**
   * Order the list by `key(id)` ascending instead of by id (null: by id again). The list
   * cursor's position is then a key, not an id; the ground truth stays sorted by id.
   */
  setListOrder(key: ((id: string) => string) | null): void {
    this.listKey = key;
    this.ordered = null;
    this.mutated();
  }

  /** Current SKU ids in the list endpoint's order. */
  listOrderIds(): string[] {
    return this.listSkus().map((s) => s.id);
  }

  private listKeyOf(sku: SkuState): string {
    return this.listKey ? this.listKey(sku.id) : sku.id;
  }

  private listSkus(): SkuState[] {
    const key = this.listKey;
    if (!key) return this.state.skus;
    if (!this.ordered || this.ordered.version !== this.revision) {
      const keyed = this.state.skus.map((s) => [key(s.id), s] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      this.ordered = { version: this.revision, skus: keyed.map(([, s]) => s) };
    }
    return this.ordered.skus;
  }

  /** A page starting after the item keyed `after`, or (`offset`) after that many items of the current order. */
  listPage(filter: ListFilter, after: string | null, limit: number, offset?: number): ListPage {
    const view = this.view(filter);
    let i = offset === undefined ? 0 : Math.min(offset, view.skus.length);
    if (after !== null && offset === undefined) {
      // Keyset: first SKU whose key sorts after the cursor's (it may have been removed since).
      let lo = 0;
      let hi = view.skus.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.listKeyOf(view.skus[mid]!) <= after) lo = mid + 1;
        else hi = mid;
      }
      i = lo;
    }
    const end = Math.min(view.skus.length, i + limit);
    const items: ListItemIn[] = [];
    const nRoots = view.scope.roots.length;
    for (let j = i; j < end; j++) {
      const sku = view.skus[j]!;
      const locationQuantities: Record<string, number> = {};
      for (const [pos, r] of view.scope.roots.entries()) locationQuantities[this.state.locations[r]!.id] = view.rootQty[j * nRoots + pos]!;
      items.push({ ...this.skuWire(sku), totalQuantity: view.totals[j]!, locationQuantities });
    }
    return {
      locations: view.locations.map((l) => ({ ...l, leafLocationIds: [...(l.leafLocationIds ?? [])] })),
      summary: { ...view.summary },
      items,
      nextAfter: end < view.skus.length && items.length > 0 ? this.listKeyOf(view.skus[end - 1]!) : null,
      nextOffset: end < view.skus.length && items.length > 0 ? end : null,
    };
  }

  /** The list item of one SKU (any filter's scope), as the list would show it. */
  listItem(skuId: string, scopeLocationId: string | null = null): ListItemIn {
    return this.itemOf(this.sku(skuId), this.scope(scopeLocationId));
  }

  private itemOf(sku: SkuState, scope: Scope): ListItemIn {
    const locationQuantities: Record<string, number> = {};
    for (const r of scope.roots) locationQuantities[this.state.locations[r]!.id] = 0;
    let total = 0;
    for (const p of sku.projections) {
      if (p.rowCount === 0 || !scope.mask[p.leaf]) continue;
      total += p.quantity;
      const rootId = this.state.locations[scope.roots[scope.rootPos[p.leaf]!]!]!.id;
      locationQuantities[rootId] = locationQuantities[rootId]! + p.quantity;
    }
    return { ...this.skuWire(sku), totalQuantity: total, locationQuantities };
  }

  detail(skuId: string, scopeLocationId: string | null = null): DetailResponseIn {
    return this.detailOf(this.sku(skuId), this.scope(scopeLocationId));
  }

  private detailOf(sku: SkuState, scope: Scope): DetailResponseIn {
    const all = this.scope(null);
    let total = 0;
    let selected = 0;
    const locations: DetailLocationIn[] = [];
    for (const p of sku.projections) {
      if (p.rowCount === 0 || !all.mask[p.leaf]) continue;
      total += p.quantity;
      if (!scope.mask[p.leaf]) continue;
      selected += p.quantity;
      locations.push(this.detailLocationWire(p));
    }
    return { sku: this.skuWire(sku), selectedQuantity: selected, totalQuantity: total, locations };
  }

  /** A page of rows older than the keyset position `after`, or (`offset`) after that many rows of the scope, newest first. */
  historyPage(skuId: string, scopeLocationId: string | null, after: HistoryKey | null, limit: number, offset?: number): HistoryPage {
    const sku = this.sku(skuId);
    const scope = this.scope(scopeLocationId);
    const rows = sku.rows;
    // Rows are chronological; the endpoint walks backwards from just before the cursor.
    let i = after ? insertionIndex(rows, { t: after.t, seq: after.s }) - 1 : rows.length - 1;
    for (let skip = offset ?? 0; skip > 0 && i >= 0; i--) if (scope.mask[rows[i]!.leaf]) skip--;
    const skipped = offset ?? 0;
    const items: HistoryRowIn[] = [];
    let last: Row | null = null;
    for (; i >= 0 && items.length < limit; i--) {
      const row = rows[i]!;
      if (!scope.mask[row.leaf]) continue;
      items.push(this.rowWire(sku, row));
      last = row;
    }
    let more = false;
    for (; i >= 0 && !more; i--) more = scope.mask[rows[i]!.leaf] === 1;
    return { items, nextAfter: more && last ? { t: last.t, s: last.seq } : null, nextOffset: more && last ? skipped + items.length : null };
  }

  /** Everything a mirror should end up holding, rendered by the endpoints' own code. */
  groundTruth(): GroundTruth {
    return {
      workspace: { workspace: { ...this.state.workspace }, scope: "read" },
      locations: this.locations().locations,
      skus: [...this.groundTruthSkus()],
    };
  }

  /**
   * The ground truth's SKU entries one at a time (the server streams them: at 100k SKUs
   * the whole document is too big for one string). Iterates a snapshot of the SKU list.
   */
  *groundTruthSkus(): Generator<GroundTruthSku> {
    const all = this.scope(null);
    for (const sku of this.state.skus.slice()) {
      const unreflected: Record<string, number> = {};
      for (const p of sku.projections) if (p.rowCount > 0 && all.mask[p.leaf]) unreflected[this.state.locations[p.leaf]!.id] = p.unreflected;
      const history: HistoryRowIn[] = [];
      for (let i = sku.rows.length - 1; i >= 0; i--) history.push(this.rowWire(sku, sku.rows[i]!));
      yield { item: this.itemOf(sku, all), detail: this.detailOf(sku, all), history, unreflected };
    }
  }

  /** Current SKU ids in list order. */
  skuIds(): string[] {
    return this.state.skus.map((s) => s.id);
  }

  /** Ids of active leaves (stock-holding locations), in location order. */
  activeLeafIds(): string[] {
    return this.state.leaves.map((l) => this.state.locations[l]!.id);
  }

  /** True stock of a SKU at a leaf (replay of every row, reflected or not). */
  balance(skuId: string, leafId: string): number {
    const sku = this.sku(skuId);
    const leaf = this.activeLeaf(leafId);
    return sku.projections.find((p) => p.leaf === leaf)?.balance ?? 0;
  }

  size(): { skus: number; rows: number } {
    let rows = 0;
    for (const s of this.state.skus) rows += s.rows.length;
    return { skus: this.state.skus.length, rows };
  }

  // ------------------------------------------------------------ mutations

  /** A movement row at a leaf, stamped now: delta > 0 is a receipt, < 0 a shipment (unless opts.eventType says otherwise). */
  movement(skuId: string, leafId: string, delta: number, opts: { eventType?: EventTypeKey; note?: string | null } = {}): HistoryRowIn {
    const sku = this.sku(skuId);
    const leaf = this.activeLeaf(leafId);
    assertNonZeroInt("delta", delta);
    const type = opts.eventType ?? (delta > 0 ? "receipt" : "shipment");
    // A transfer half on its own would break "transfers are pairs within one root".
    if (type === "transferIn" || type === "transferOut") throw new RangeError("use transfer() for transfer rows");
    assertDirection(type, delta);
    const before = this.projectionOf(sku, leaf)?.balance ?? 0;
    if (before + delta < 0) throw new RangeError(`movement of ${delta} would make the stock at ${leafId} negative (balance ${before})`);
    const row = this.newRow(leaf, this.stamp(), "movement", type, Math.abs(delta), delta, sku.nextRef++, opts.note ?? null);
    this.appendNewest(sku, [row]);
    return this.rowWire(sku, row);
  }

  /** A confirmed SET: the observed count becomes the balance; its row carries observed − balance before (may be 0). */
  set(skuId: string, leafId: string, observed: number, opts: { note?: string | null } = {}): HistoryRowIn {
    const sku = this.sku(skuId);
    const leaf = this.activeLeaf(leafId);
    if (!Number.isInteger(observed) || observed < 0) throw new RangeError(`observed must be an integer >= 0, got ${observed}`);
    const before = this.projectionOf(sku, leaf)?.balance ?? 0;
    const row = this.newRow(leaf, this.stamp(), "set", null, observed, observed - before, sku.nextRef++, opts.note ?? null);
    this.appendNewest(sku, [row]);
    return this.rowWire(sku, row);
  }

  /** Two rows sharing one event id and occurredAt: out at `fromLeafId`, in at `toLeafId` (same root). */
  transfer(skuId: string, fromLeafId: string, toLeafId: string, qty: number): [HistoryRowIn, HistoryRowIn] {
    const sku = this.sku(skuId);
    const from = this.activeLeaf(fromLeafId);
    const to = this.activeLeaf(toLeafId);
    if (from === to) throw new RangeError("transfer needs two different leaves");
    if (this.state.locations[from]!.root !== this.state.locations[to]!.root) throw new RangeError("transfer leaves must be under the same root");
    assertNonZeroInt("qty", qty);
    if (qty < 0) throw new RangeError(`qty must be positive, got ${qty}`);
    const before = this.projectionOf(sku, from)?.balance ?? 0;
    if (qty > before) throw new RangeError(`cannot transfer ${qty} from a leaf holding ${before}`);
    const t = this.stamp();
    const ref = sku.nextRef++;
    const out = this.newRow(from, t, "movement", "transferOut", qty, -qty, ref, "Rebalancing");
    const inn = this.newRow(to, t, "movement", "transferIn", qty, qty, ref, "Rebalancing");
    this.appendNewest(sku, [out, inn]);
    return [this.rowWire(sku, out), this.rowWire(sku, inn)];
  }

  /** A new SKU (its own product) with no history: it lists with 0 stock. Returns its id. */
  addSku(init: { name?: string; productName?: string; brand?: string; unit?: string; options?: Record<string, string> } = {}): string {
    const s = this.state;
    const [sku] = makeProduct(this.mutationRng, s.nextProductNo++, 1, s.nextSkuIdx++, s.byId);
    if (!sku) throw new Error("makeProduct returned no SKU");
    if (init.productName !== undefined || init.brand !== undefined) {
      sku.product = { ...sku.product, name: init.productName ?? sku.product.name, brand: init.brand ?? sku.product.brand };
    }
    if (init.options !== undefined) sku.options = { ...init.options };
    if (init.unit !== undefined) sku.unit = init.unit;
    if (init.name !== undefined) sku.name = init.name;
    this.refreshSearch(sku);
    s.skus.splice(this.skuPosition(sku.id), 0, sku);
    s.byId.set(sku.id, sku);
    this.mutated();
    return sku.id;
  }

  /** The SKU disappears from list, detail (404) and history (404); outstanding cursors still work. */
  removeSku(skuId: string): void {
    const sku = this.sku(skuId);
    const pos = this.skuPosition(sku.id);
    if (this.state.skus[pos] !== sku) throw new Error("SKU index out of sync");
    this.state.skus.splice(pos, 1);
    this.state.byId.delete(sku.id);
    this.removed.set(sku.id, sku);
    this.mutated();
  }

  /**
   * A removed SKU comes back, as it was (same id, fields and history): the document does not say
   * a deleted SKU stays gone, so the mirror must take a SKU it marked deleted back (a revival).
   */
  reviveSku(skuId: string): void {
    const sku = this.removed.get(skuId);
    if (!sku) throw new RangeError(`SKU ${skuId} was not removed`);
    this.removed.delete(skuId);
    this.state.skus.splice(this.skuPosition(sku.id), 0, sku);
    this.state.byId.set(sku.id, sku);
    this.mutated();
  }

  renameSku(skuId: string, name: string): void {
    if (!name) throw new RangeError("name must not be empty");
    const sku = this.sku(skuId);
    sku.name = name;
    this.refreshSearch(sku);
    this.mutated();
  }

  /**
   * A movement that arrives late: occurredAt = (the SKU's newest row) − agoMs, so it sorts
   * before rows already served. Later SET rows at that leaf get their delta recomputed.
   * At a non-clean leaf the late row is not reflected, and since "unreflected" is always a
   * suffix, the projection's reflected part then ends just before it (it is re-based).
   * Throws (and changes nothing) if any balance would go negative.
   */
  lateRow(skuId: string, leafId: string, delta: number, agoMs: number): HistoryRowIn {
    const sku = this.sku(skuId);
    const leaf = this.activeLeaf(leafId);
    assertNonZeroInt("delta", delta);
    if (!Number.isInteger(agoMs) || agoMs < 1) throw new RangeError(`agoMs must be an integer >= 1, got ${agoMs}`);
    const newest = sku.rows.length ? sku.rows[sku.rows.length - 1]!.t : this.state.highWater;
    const t = Math.max(0, newest - agoMs);
    const row = this.newRow(leaf, t, "movement", delta > 0 ? "receipt" : "adjustment", Math.abs(delta), delta, sku.nextRef++, "Late entry");
    this.insertPast(sku, row, () => {
      sku.nextRef--;
      return `late row of ${delta} would make the stock at ${leafId} negative`;
    });
    return this.rowWire(sku, row);
  }

  /**
   * One more copy of the movement row at newest-first position `position`, identical in every
   * field (same event, occurredAt, leaf, quantity, note): a line the server adds to an event
   * it already returned. It sorts as the newest of the rows sharing that occurredAt. Throws
   * (and changes nothing) for a SET row, or if a balance would go negative.
   */
  identicalCopy(skuId: string, position: number): HistoryRowIn {
    const sku = this.sku(skuId);
    const src = sku.rows[sku.rows.length - 1 - position];
    if (!src) throw new RangeError(`SKU ${skuId} has no history row at position ${position}`);
    if (src.kind !== "movement" || src.type === "transferIn" || src.type === "transferOut") {
      throw new RangeError("only a movement row outside a transfer can be copied (a SET's delta is recomputed, a transfer is a pair)");
    }
    const row = this.newRow(src.leaf, src.t, "movement", src.type, src.amount, src.delta, src.ref, src.note);
    this.insertPast(sku, row, () => `a copy of row ${position} would make the stock negative`);
    return this.rowWire(sku, row);
  }

  /** Insert a row at its place in time (not necessarily the newest); re-replay; undo and throw if a balance goes negative. */
  private insertPast(sku: SkuState, row: Row, negativeMessage: () => string): void {
    const leaf = row.leaf;
    const pos = insertionIndex(sku.rows, row);
    const existing = this.projectionOf(sku, leaf);
    const snapshot = existing ? { ...existing } : null;
    sku.rows.splice(pos, 0, row);
    if (existing && existing.status !== "clean") {
      let fromLate = 0;
      for (let i = pos; i < sku.rows.length; i++) if (sku.rows[i]!.leaf === leaf) fromLate++;
      existing.unreflected = Math.max(existing.unreflected + 1, fromLate);
    }
    const negative = replay(sku, [leaf], this.state.leafRank);
    if (negative) {
      sku.rows.splice(pos, 1);
      if (existing && snapshot) Object.assign(existing, snapshot);
      else sku.projections = sku.projections.filter((p) => p.leaf !== leaf);
      replay(sku, [leaf], this.state.leafRank);
      throw new RangeError(`${negativeMessage()} at ${new Date(negative.t).toISOString()}`);
    }
    this.mutated();
  }

  /** From now on, new rows at this SKU × leaf are not reflected in its quantity until settle(). */
  markDirty(skuId: string, leafId: string, status: Exclude<FreshnessStatus, "clean"> = "dirty"): void {
    if (!NOT_CLEAN.includes(status)) throw new RangeError(`status must be one of ${NOT_CLEAN.join(", ")}`);
    const sku = this.sku(skuId);
    const leaf = this.activeLeaf(leafId);
    let proj = this.projectionOf(sku, leaf);
    if (!proj) {
      // No rows yet: an invisible projection holds the status until the first row arrives.
      proj = cleanProjection(leaf);
      insertProjection(sku, proj, this.state.leafRank);
    }
    proj.status = status;
    this.mutated();
  }

  /** Replay the given (or every) non-clean projection: clean again, every row reflected. Returns how many were settled. */
  settle(skuId?: string, leafId?: string): number {
    const skus = skuId === undefined ? this.state.skus : [this.sku(skuId)];
    const leaf = leafId === undefined ? undefined : this.activeLeaf(leafId);
    let settled = 0;
    for (const sku of skus) {
      const touched: number[] = [];
      for (const p of sku.projections) {
        if (p.status === "clean" || (leaf !== undefined && p.leaf !== leaf)) continue;
        p.status = "clean";
        p.unreflected = 0;
        touched.push(p.leaf);
      }
      if (!touched.length) continue;
      settled += touched.length;
      replay(sku, touched, this.state.leafRank);
      sku.projections = sku.projections.filter((p) => p.rowCount > 0 || p.status !== "clean");
    }
    if (settled) this.mutated();
    return settled;
  }

  /** Apply a mix of mutations to about `fraction` of the SKUs. Deterministic for a given seed and state. */
  randomChurn(fraction: number, seed?: number): ChurnSummary {
    const run = this.churnRuns++;
    return randomChurn(this, fraction, createRng(seed ?? this.seed, "churn", seed === undefined ? run : 0));
  }

  // ------------------------------------------------------------ internals

  private sku(id: string): SkuState {
    const sku = this.state.byId.get(id);
    if (!sku) throw new SimApiError(404, "not_found", `No SKU with id ${id}`);
    return sku;
  }

  private activeLeaf(id: string): number {
    const loc = this.state.locations.find((l) => l.id === id);
    if (loc?.kind !== "leaf" || !loc.active) throw new RangeError(`${id} is not an active leaf location`);
    return loc.idx;
  }

  private projectionOf(sku: SkuState, leaf: number): Projection | undefined {
    return sku.projections.find((p) => p.leaf === leaf);
  }

  private skuPosition(id: string): number {
    const skus = this.state.skus;
    let lo = 0;
    let hi = skus.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (skus[mid]!.id < id) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private refreshSearch(sku: SkuState): void {
    sku.search = searchText(sku.product.name, sku.code, sku.skuCode, sku.name, sku.barcode);
  }

  /** occurredAt for a new row: the clock, but strictly after every row stored so far. */
  private stamp(): number {
    const t = Math.max(Math.trunc(this.now()), this.state.highWater + 1);
    this.state.highWater = t;
    return t;
  }

  private newRow(leaf: number, t: number, kind: Row["kind"], type: EventTypeKey | null, amount: number, delta: number, ref: number, note: string | null): Row {
    return { seq: this.state.nextSeq++, t, leaf, kind, type, amount, delta, ref, note };
  }

  /** Rows stamped now are the newest: appended; a non-clean projection does not reflect them. */
  private appendNewest(sku: SkuState, rows: Row[]): void {
    const leaves = new Set<number>();
    for (const row of rows) {
      sku.rows.push(row);
      leaves.add(row.leaf);
      const proj = this.projectionOf(sku, row.leaf);
      if (proj && proj.status !== "clean") proj.unreflected++;
    }
    const negative = replay(sku, leaves, this.state.leafRank);
    if (negative) throw new Error(`invariant broken: negative balance at leaf ${negative.leaf}`);
    this.mutated();
  }

  private mutated(): void {
    this.revision++;
  }

  private scope(id: string | null): Scope {
    const scope = this.scopes.get(id ?? "");
    if (!scope) throw new SimApiError(404, "not_found", `No location with id ${id}`);
    return scope;
  }

  /** One scope per location plus the whole workspace; locations never change. */
  private buildScopes(): void {
    const { locations, roots } = this.state;
    const make = (key: string, nodes: number[], inScopeRoots: number[]): Scope => {
      const mask = new Uint8Array(locations.length);
      const rootPos = new Int32Array(locations.length).fill(-1);
      const leafIds: string[][] = inScopeRoots.map(() => []);
      const stack = [...nodes];
      const leaves: number[] = [];
      while (stack.length) {
        const idx = stack.pop()!;
        const loc = locations[idx]!;
        if (loc.kind === "leaf" && loc.active) leaves.push(idx);
        stack.push(...loc.children);
      }
      leaves.sort((a, b) => a - b);
      for (const leaf of leaves) {
        mask[leaf] = 1;
        const pos = inScopeRoots.indexOf(locations[leaf]!.root);
        rootPos[leaf] = pos;
        leafIds[pos]!.push(locations[leaf]!.id);
      }
      return { key, mask, roots: inScopeRoots, rootPos, leafIds };
    };
    this.scopes.set("", make("", roots, roots));
    for (const loc of locations) this.scopes.set(loc.id, make(loc.id, [loc.idx], [loc.root]));
  }

  private view(filter: ListFilter): ListView {
    const q = filter.q.toLowerCase();
    const key = `${filter.scopeLocationId ?? ""}\u0000${filter.stockState}\u0000${q}`;
    const cached = this.views.get(key);
    if (cached && cached.version === this.revision) return cached;
    const view = this.buildView(this.scope(filter.scopeLocationId), q, filter.stockState);
    this.views.delete(key);
    this.views.set(key, view);
    if (this.views.size > MAX_CACHED_VIEWS) this.views.delete(this.views.keys().next().value!);
    return view;
  }

  private buildView(scope: Scope, q: string, stockState: StockState): ListView {
    const nRoots = scope.roots.length;
    const skus: SkuState[] = [];
    const totals: number[] = [];
    const rootQtyList: number[] = [];
    const rootSkus = new Array<number>(nRoots).fill(0);
    const rootTotals = new Array<number>(nRoots).fill(0);
    const qty = new Float64Array(nRoots);
    const has = new Uint8Array(nRoots);
    let sum = 0;
    for (const sku of this.listSkus()) {
      if (q && !sku.search.includes(q)) continue;
      qty.fill(0);
      has.fill(0);
      let total = 0;
      for (const p of sku.projections) {
        if (p.rowCount === 0 || !scope.mask[p.leaf]) continue;
        const pos = scope.rootPos[p.leaf]!;
        qty[pos] = qty[pos]! + p.quantity;
        has[pos] = 1;
        total += p.quantity;
      }
      if (stockState === "in_stock" && !(total > 0)) continue;
      if (stockState === "empty" && !(total <= 0)) continue;
      skus.push(sku);
      totals.push(total);
      sum += total;
      for (let pos = 0; pos < nRoots; pos++) {
        rootQtyList.push(qty[pos]!);
        if (has[pos]) rootSkus[pos]!++;
        rootTotals[pos] = rootTotals[pos]! + qty[pos]!;
      }
    }
    const locations: RootSummaryIn[] = scope.roots.map((r, pos) => {
      const root = this.state.locations[r]!;
      const n = rootSkus[pos]!;
      const total = rootTotals[pos]!;
      return {
        id: root.id,
        name: root.name,
        code: root.code,
        childCount: root.children.length,
        leafLocationIds: scope.leafIds[pos]!,
        skuCount: n,
        totalQuantity: total,
        averageQuantityPerSku: n ? total / n : 0,
      };
    });
    return {
      version: this.revision,
      scope,
      skus,
      totals,
      rootQty: Float64Array.from(rootQtyList),
      locations,
      summary: { skuCount: skus.length, totalQuantity: sum, averageQuantityPerSku: skus.length ? sum / skus.length : 0 },
    };
  }

  private skuWire(sku: SkuState): SkuIn {
    return {
      id: sku.id,
      code: sku.code,
      skuCode: sku.skuCode,
      name: sku.name,
      barcode: sku.barcode,
      unit: sku.unit,
      product: { ...sku.product },
      options: { ...sku.options },
    };
  }

  private detailLocationWire(p: Projection): DetailLocationIn {
    const loc = this.state.locations[p.leaf]!;
    return {
      id: loc.id,
      name: loc.name,
      code: loc.code,
      parentId: this.state.locations[loc.parent]!.id,
      quantity: p.quantity,
      freshness: {
        status: p.status,
        lastReplayedAt: p.lastReplayedAt === null ? null : iso(p.lastReplayedAt),
        lastSourceKind: p.lastSourceKind,
      },
    };
  }

  /** One literal per kind (no spreads): this runs for every row of a ground-truth dump. */
  private rowWire(sku: SkuState, row: Row): HistoryRowIn {
    const loc = this.state.locations[row.leaf]!;
    const direction = row.delta > 0 ? "in" : row.delta < 0 ? "out" : "none";
    if (row.kind === "set") {
      return {
        kind: "set",
        occurredAt: iso(row.t),
        direction,
        quantity: row.delta,
        locationId: loc.id,
        locationName: loc.name,
        locationCode: loc.code,
        eventId: null,
        eventTypeCode: null,
        eventTypeName: null,
        setSessionId: this.sessionUuid(sku.idx, row.ref),
        setTypeCode: SET_TYPE_CODE,
        observedQuantity: row.amount,
        note: row.note,
      };
    }
    const type = EVENT_TYPES[row.type!];
    return {
      kind: "movement",
      occurredAt: iso(row.t),
      direction,
      quantity: row.amount,
      locationId: loc.id,
      locationName: loc.name,
      locationCode: loc.code,
      eventId: this.eventUuid(sku.idx, row.ref),
      eventTypeCode: type.code,
      eventTypeName: type.name,
      setSessionId: null,
      setTypeCode: null,
      observedQuantity: null,
      note: row.note,
    };
  }
}

function iso(t: number): string {
  return new Date(t).toISOString();
}

function assertNonZeroInt(name: string, v: number): void {
  if (!Number.isInteger(v) || v === 0) throw new RangeError(`${name} must be a non-zero integer, got ${v}`);
}

function assertDirection(type: EventTypeKey, delta: number): void {
  const dir = EVENT_TYPES[type].direction;
  if ((dir === "in" && delta < 0) || (dir === "out" && delta > 0)) throw new RangeError(`${type} cannot have delta ${delta}`);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
