/**
 * Builds the initial workspace: location tree, SKU catalogue, per-SKU history and the
 * projections derived from it. Everything is a function of the options (no wall clock, no
 * Math.random), and each SKU's history comes from its own PRNG stream, so changing the SKU
 * count does not reshuffle the histories of the SKUs that remain.
 */
import { createRng, type Rng } from "./prng.js";
import { replay } from "./replay.js";
import { applyHistoryRole, assertVarianceFits, historyRole, roleTarget } from "./history-variance.js";
import type { LocationNodeIn, LocationState, Row, SkuState, WorkspaceState } from "./types.js";
import { ADJECTIVES, BRANDS, FAMILIES, FRESHNESS_NOT_CLEAN, letters, NODE_KIND, NOTES, type EventTypeKey } from "./vocabulary.js";

/** The generated timeline ends here; data never depends on the wall clock. */
export const TIMELINE_END = Date.UTC(2026, 5, 1, 0, 0, 0, 0);
const DAY = 86_400_000;

export interface GenerateOptions {
  seed: number;
  skus: number;
  roots: number;
  sectionsPerRoot: number;
  leavesPerSection: number;
  historyDepth: number;
  workspaceName: string;
  /** SKUs given a pair of identical history rows (history-variance.ts). */
  identicalRows: number;
  /** SKUs given a long run of history rows sharing one occurredAt (history-variance.ts). */
  tieRuns: number;
}

/**
 * Chance that a projection with at least two rows is generated not clean. About 1 in 6
 * projections has a single row and is never picked, so 3.6 % of the eligible ones gives
 * the intended ~3 % of all SKU × leaf pairs.
 */
const NOT_CLEAN_SHARE = 0.036;

export function generateWorkspace(o: GenerateOptions): WorkspaceState {
  assertCount("skus", o.skus, 0);
  assertCount("roots", o.roots, 1);
  assertCount("sectionsPerRoot", o.sectionsPerRoot, 1);
  assertCount("leavesPerSection", o.leavesPerSection, 1);
  if (!(o.historyDepth >= 0) || !Number.isFinite(o.historyDepth)) {
    throw new RangeError(`historyDepth must be a finite number >= 0, got ${o.historyDepth}`);
  }
  assertVarianceFits(o);
  const head = createRng(o.seed, "workspace");
  const workspace = { id: head.uuid(), name: o.workspaceName };
  const locations = buildLocations(o);
  const roots = locations.filter((l) => l.kind === "root").map((l) => l.idx);
  const leaves = locations.filter((l) => l.kind === "leaf" && l.active).map((l) => l.idx);
  const leafRank = rankLeaves(locations);

  const state: WorkspaceState = {
    seed: o.seed,
    workspace,
    locations,
    roots,
    leaves,
    leafRank,
    skus: [],
    byId: new Map(),
    nextSeq: 1,
    nextSkuIdx: 0,
    nextProductNo: 1,
    highWater: TIMELINE_END,
  };
  const leavesByRoot = new Map<number, number[]>(roots.map((r) => [r, leaves.filter((l) => locations[l]!.root === r)]));
  const catalog = createRng(o.seed, "catalog");
  const skus: SkuState[] = [];
  let productNo = 0;
  while (skus.length < o.skus) {
    productNo++;
    for (const sku of makeProduct(catalog, productNo, o.skus - skus.length, skus.length, state.byId)) {
      skus.push(sku);
      state.byId.set(sku.id, sku);
    }
  }
  for (const sku of skus) {
    const rng = createRng(o.seed, "history", sku.idx);
    const role = historyRole(sku.idx, o);
    const target = forcedTarget(sku.idx, o, rng) ?? roleTarget(role, rng) ?? rowTarget(rng, o.historyDepth);
    sku.rows = generateHistory(rng, state, leavesByRoot, sku, target);
    applyHistoryRole(state, sku, role);
    replay(sku, undefined, leafRank);
    markInitialNotClean(rng, sku, leafRank, sku.idx === 2 && o.skus > 3);
  }
  state.nextSkuIdx = skus.length;
  state.nextProductNo = productNo + 1;
  state.skus = skus.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return state;
}

function assertCount(name: string, v: number, min: number): void {
  if (!Number.isInteger(v) || v < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${v}`);
}

// ---------------------------------------------------------------- locations

function buildLocations(o: GenerateOptions): LocationState[] {
  const rng = createRng(o.seed, "locations");
  const out: LocationState[] = [];
  const add = (name: string, code: string, kind: LocationState["kind"], parent: number, active = true): LocationState => {
    const idx = out.length;
    const loc: LocationState = {
      idx,
      id: rng.uuid(),
      name,
      code,
      kind,
      parent,
      root: parent < 0 ? idx : out[parent]!.root,
      children: [],
      active,
      node: undefined as unknown as LocationNodeIn,
    };
    out.push(loc);
    if (parent >= 0) out[parent]!.children.push(idx);
    return loc;
  };
  for (let r = 0; r < o.roots; r++) {
    const root = add(`Warehouse ${letters(r)}`, `WH-${letters(r)}`, "root", -1);
    for (let s = 0; s < o.sectionsPerRoot; s++) {
      const section = add(`Aisle ${s + 1}`, `${root.code}-A${s + 1}`, "section", root.idx);
      for (let l = 0; l < o.leavesPerSection; l++) add(`Shelf ${l + 1}`, `${section.code}-S${l + 1}`, "leaf", section.idx);
      // Exactly one retired shelf: listed by /locations, excluded from every stock query.
      if (r === 0 && s === 0) {
        const n = o.leavesPerSection + 1;
        add(`Shelf ${n} (retired)`, `${section.code}-S${n}`, "leaf", section.idx, false);
      }
    }
  }
  for (const loc of out) {
    const path: LocationState[] = [];
    for (let cur: LocationState | undefined = loc; cur; cur = cur.parent >= 0 ? out[cur.parent] : undefined) path.unshift(cur);
    const parent = loc.parent >= 0 ? out[loc.parent]! : null;
    const updatedAt = TIMELINE_END - 30 * DAY - rng.int(365 * DAY);
    loc.node = {
      id: loc.id,
      name: loc.name,
      code: loc.code,
      parentId: parent ? parent.id : null,
      parentName: parent ? parent.name : null,
      nodeKind: NODE_KIND[loc.kind],
      depth: path.length - 1,
      pathIds: path.map((p) => p.id),
      pathNames: path.map((p) => p.name),
      displayPath: path.map((p) => p.name).join(" / "),
      isLeaf: loc.children.length === 0,
      childCount: loc.children.length,
      selectable: loc.active,
      status: loc.active ? "active" : "inactive",
      updatedAt: new Date(updatedAt).toISOString(),
    };
  }
  return out;
}

function rankLeaves(locations: LocationState[]): Int32Array {
  const rank = new Int32Array(locations.length).fill(-1);
  const leafIdx = locations.filter((l) => l.kind === "leaf").map((l) => l.idx);
  leafIdx.sort((a, b) => (locations[a]!.id < locations[b]!.id ? -1 : 1));
  for (const [i, idx] of leafIdx.entries()) rank[idx] = i;
  return rank;
}

// ---------------------------------------------------------------- catalogue

/** One product and its 1–4 variant SKUs (options differ; product id / name / brand shared). */
export function makeProduct(rng: Rng, productNo: number, maxSkus: number, firstIdx: number, taken: ReadonlyMap<string, unknown>): SkuState[] {
  const family = rng.pick(FAMILIES);
  const brand = rng.pick(BRANDS);
  const productName = `${rng.pick(ADJECTIVES)} ${rng.pick(family.nouns)}`;
  const product = { id: rng.uuid(), name: productName, brand };
  const unit = rng.pick(family.units);
  const optionNames = Object.keys(family.options);
  const wanted = optionNames.length === 0 ? 1 : Math.min(maxSkus, 1 + rng.int(4));
  const combos: Record<string, string>[] = [];
  const seen = new Set<string>();
  for (let attempt = 0; combos.length < wanted && attempt < 20; attempt++) {
    const combo: Record<string, string> = {};
    for (const name of optionNames) combo[name] = rng.pick(family.options[name]!);
    const key = JSON.stringify(combo);
    if (seen.has(key)) continue;
    seen.add(key);
    combos.push(combo);
  }
  const brandCode = brand.slice(0, 3).toUpperCase();
  return combos.map((options, i) => {
    const idx = firstIdx + i;
    const values = Object.values(options);
    let id = rng.uuid();
    while (taken.has(id)) id = rng.uuid();
    const code = `SKU-${String(idx + 1).padStart(6, "0")}`;
    const optCode = values.map((v) =>
      v
        .replace(/[^A-Za-z0-9]/g, "")
        .slice(0, 3)
        .toUpperCase(),
    );
    const skuCode = [brandCode, String(productNo).padStart(4, "0"), ...optCode].join("-");
    const name = values.length ? `${productName} ${values.join(" / ")}` : productName;
    const barcode = ean13(rng);
    return {
      idx,
      id,
      code,
      skuCode,
      name,
      barcode,
      unit,
      product,
      options,
      search: searchText(productName, code, skuCode, name, barcode),
      rows: [],
      projections: [],
      nextRef: 0,
    };
  });
}

/** Lowercased search fields joined by NUL: `q` matches within one field only. */
export function searchText(productName: string, code: string, skuCode: string, name: string, barcode: string): string {
  return [productName, code, skuCode, name, barcode].join("\u0000").toLowerCase();
}

/** 13 digits with a valid EAN check digit. */
function ean13(rng: Rng): string {
  let digits = "8";
  for (let i = 0; i < 11; i++) digits += String(rng.int(10));
  let sum = 0;
  for (let i = 0; i < 12; i++) sum += Number(digits[i]) * (i % 2 === 0 ? 1 : 3);
  return digits + String((10 - (sum % 10)) % 10);
}

// ---------------------------------------------------------------- history

const BIG_MIN = 101;
const BIG_MAX = 250;

/**
 * Rows for one SKU: mean ≈ historyDepth. About 5 % of SKUs have none (they list with 0
 * stock) and up to 2 % have more than 100 rows, so history paging is exercised at the
 * default page size; the big share shrinks for small depths so the mean still holds.
 */
function rowTarget(rng: Rng, depth: number): number {
  if (depth <= 0) return 0;
  const bigMean = (BIG_MIN + BIG_MAX) / 2;
  const pZero = 0.05;
  const pBig = Math.min(0.02, (0.25 * depth) / bigMean);
  const restMean = Math.max(1, (depth - pBig * bigMean) / (1 - pZero - pBig));
  const r = rng.next();
  if (r < pZero) return 0;
  if (r < pZero + pBig) return rng.range(BIG_MIN, BIG_MAX);
  return 1 + rng.int(Math.max(1, Math.round(2 * restMean - 1)));
}

/**
 * Fixed roles for the first SKUs created, so every dataset with depth > 0 and at least
 * four SKUs has a SKU with > 100 rows (index 0), one with none (index 1) and a non-clean
 * projection (index 2), whatever the seed.
 */
function forcedTarget(idx: number, o: GenerateOptions, rng: Rng): number | null {
  if (o.historyDepth <= 0 || o.skus < 4) return null;
  if (idx === 0) return rng.range(130, 190);
  if (idx === 1) return 0;
  if (idx === 2) return rng.range(8, 16);
  return null;
}

type Action = "receipt" | "batch" | "shipment" | "transfer" | "set" | "adjustment" | "return";
const ACTIONS: readonly (readonly [Action, number])[] = [
  ["receipt", 24],
  ["batch", 6],
  ["shipment", 28],
  ["transfer", 12],
  ["set", 14],
  ["adjustment", 10],
  ["return", 6],
];

function chooseLeaves(rng: Rng, state: WorkspaceState, leavesByRoot: Map<number, number[]>): number[] {
  const home = rng.pick(state.roots);
  const homeLeaves = shuffled(rng, leavesByRoot.get(home)!);
  const chosen = homeLeaves.slice(0, 1 + rng.int(Math.min(3, homeLeaves.length)));
  if (state.roots.length > 1 && rng.chance(0.3)) {
    const other = rng.pick(state.roots.filter((r) => r !== home));
    const otherLeaves = shuffled(rng, leavesByRoot.get(other)!);
    chosen.push(...otherLeaves.slice(0, 1 + rng.int(Math.min(2, otherLeaves.length))));
  }
  return chosen;
}

function shuffled<T>(rng: Rng, items: readonly T[]): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** One SKU's history while it is written: the rows so far, the time of the next event, each chosen leaf's balance. */
interface HistoryWriter {
  rng: Rng;
  state: WorkspaceState;
  sku: SkuState;
  rows: Row[];
  /** The leaves this SKU's history uses. */
  leaves: number[];
  bal: Map<number, number>;
  /** occurredAt of the event being written (epoch ms). */
  t: number;
  /** Rows still to write, counted before the event being written. */
  remaining: number;
  /** Leaves with stock (shipment and transfer only). */
  stocked: number[];
  /** Stocked leaf → other leaf under the same root (transfer only). */
  transferPairs: Array<readonly [number, number]>;
}

function generateHistory(rng: Rng, state: WorkspaceState, leavesByRoot: Map<number, number[]>, sku: SkuState, target: number): Row[] {
  if (target === 0) return [];
  const leaves = chooseLeaves(rng, state, leavesByRoot);
  const spanMs = (30 + rng.int(336)) * DAY;
  const meanGap = spanMs / (target + 1);
  const w: HistoryWriter = {
    rng,
    state,
    sku,
    rows: [],
    leaves,
    bal: new Map<number, number>(leaves.map((l) => [l, 0])),
    t: TIMELINE_END - spanMs,
    remaining: target,
    stocked: [],
    transferPairs: [],
  };
  while (w.rows.length < target) {
    w.remaining = target - w.rows.length;
    advanceTime(w, meanGap);
    EMIT[chooseAction(w)](w);
  }
  return w.rows;
}

/** The next event's time: an exponential gap, often on the whole second, never past the timeline's end or back. */
function advanceTime(w: HistoryWriter, meanGap: number): void {
  const prev = w.t;
  let t = w.t + Math.floor(meanGap * -Math.log(1 - w.rng.next()));
  // Many events are stamped on the whole second: rows of different events (and SKUs) then share an occurredAt.
  if (w.rng.chance(0.4)) t = Math.floor(t / 1000) * 1000;
  w.t = Math.min(TIMELINE_END, Math.max(prev, t));
}

/** A weighted action (the first is a receipt), falling back to a receipt when the balances or the rows left do not allow it. */
function chooseAction(w: HistoryWriter): Action {
  let action: Action = w.rows.length === 0 ? "receipt" : w.rng.weighted(ACTIONS);
  const { leaves, bal, remaining } = w;
  const rootOf = (leaf: number): number => w.state.locations[leaf]!.root;
  // Only built when the action needs them: this loop runs ~1.2 M times at 100k SKUs.
  w.stocked = action === "shipment" || action === "transfer" ? leaves.filter((l) => bal.get(l)! > 0) : [];
  w.transferPairs = action === "transfer" && remaining >= 2 ? w.stocked.flatMap((a) => leaves.filter((b) => b !== a && rootOf(b) === rootOf(a)).map((b) => [a, b] as const)) : [];
  if (action === "batch" && (remaining < 2 || leaves.length < 2)) action = "receipt";
  if (action === "shipment" && w.stocked.length === 0) action = "receipt";
  if (action === "transfer" && w.transferPairs.length === 0) action = "receipt";
  return action;
}

function movement(w: HistoryWriter, leaf: number, type: EventTypeKey, signed: number, ref: number, note: string | null): void {
  w.rows.push({ seq: w.state.nextSeq++, t: w.t, leaf, kind: "movement", type, amount: Math.abs(signed), delta: signed, ref, note });
  w.bal.set(leaf, w.bal.get(leaf)! + signed);
}

/** The rows of one event of each action. The order of the rng calls is part of the seed's meaning: keep it. */
const EMIT: Record<Action, (w: HistoryWriter) => void> = {
  receipt(w) {
    movement(w, w.rng.pick(w.leaves), "receipt", w.rng.range(5, 60), w.sku.nextRef++, receiptNote(w.rng));
  },
  batch(w) {
    // One delivery split over two shelves: separate events, same second.
    const [a, b] = shuffled(w.rng, w.leaves);
    movement(w, a!, "receipt", w.rng.range(5, 40), w.sku.nextRef++, receiptNote(w.rng));
    movement(w, b!, "receipt", w.rng.range(5, 40), w.sku.nextRef++, receiptNote(w.rng));
  },
  shipment(w) {
    const leaf = w.rng.pick(w.stocked);
    movement(w, leaf, "shipment", -w.rng.range(1, Math.min(w.bal.get(leaf)!, 20)), w.sku.nextRef++, w.rng.pick(NOTES.shipment));
  },
  transfer(w) {
    // Two rows, one event id, one occurredAt; out before in (insertion order).
    const [from, to] = w.rng.pick(w.transferPairs);
    const qty = w.rng.range(1, w.bal.get(from)!);
    const ref = w.sku.nextRef++;
    const note = w.rng.pick(NOTES.transfer);
    movement(w, from, "transferOut", -qty, ref, note);
    movement(w, to, "transferIn", qty, ref, note);
  },
  set(w) {
    // A stock-take session counts several shelves at once: one session id, one occurredAt.
    const { rng, leaves, bal } = w;
    const counted = shuffled(rng, leaves).slice(0, Math.min(w.remaining, 1 + rng.int(leaves.length)));
    const ref = w.sku.nextRef++;
    const note = rng.pick(NOTES.set);
    for (const leaf of counted) {
      const before = bal.get(leaf)!;
      const observed = rng.chance(0.35) ? before : Math.max(0, before + rng.range(-4, 4));
      w.rows.push({ seq: w.state.nextSeq++, t: w.t, leaf, kind: "set", type: null, amount: observed, delta: observed - before, ref, note });
      bal.set(leaf, observed);
    }
  },
  adjustment(w) {
    const leaf = w.rng.pick(w.leaves);
    const b = w.bal.get(leaf)!;
    const signed = b > 0 && w.rng.chance(0.6) ? -w.rng.range(1, Math.min(b, 3)) : w.rng.range(1, 3);
    movement(w, leaf, "adjustment", signed, w.sku.nextRef++, w.rng.pick(NOTES.adjustment));
  },
  return(w) {
    movement(w, w.rng.pick(w.leaves), "return", w.rng.range(1, 3), w.sku.nextRef++, w.rng.pick(NOTES.return));
  },
};

function receiptNote(rng: Rng): string | null {
  return rng.chance(0.15) ? `PO-${rng.range(10000, 99999)}` : rng.pick(NOTES.receipt);
}

/**
 * About 3 % of projections lag: their newest 1–2 rows are not reflected. At least one
 * row stays reflected, so lastReplayedAt is always a timestamp in generated data.
 */
function markInitialNotClean(rng: Rng, sku: SkuState, leafRank: Int32Array, force: boolean): void {
  const eligible = sku.projections.filter((p) => p.rowCount >= 2);
  const touched: number[] = [];
  for (const p of eligible) {
    if (!(rng.chance(NOT_CLEAN_SHARE) || (force && touched.length === 0 && p === eligible[0]))) continue;
    p.status = rng.pick(FRESHNESS_NOT_CLEAN);
    p.unreflected = p.rowCount >= 3 && rng.chance(0.5) ? 2 : 1;
    touched.push(p.leaf);
  }
  if (touched.length) replay(sku, touched, leafRank);
}
