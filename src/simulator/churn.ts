/**
 * Random churn for incremental-sync tests: a seeded mix of the model's own mutations over
 * a fraction of the SKUs. It only calls public mutations, so every invariant those keep
 * holds after churn too; it reads the state only to choose valid arguments (a leaf that
 * has stock to ship, a pair of leaves under one root for a transfer).
 */
import type { HistoryRowIn, WorkspaceState } from "./types.js";
import type { Rng } from "./prng.js";
import type { SkuState } from "./types.js";
import { FRESHNESS_NOT_CLEAN } from "./vocabulary.js";

/**
 * What churn does to the model: the model's own mutations (src/simulator/model.ts), named
 * here so that churn does not import the model that calls it.
 */
export interface ChurnTarget {
  readonly state: WorkspaceState;
  skuIds(): string[];
  balance(skuId: string, leafId: string): number;
  movement(skuId: string, leafId: string, delta: number): HistoryRowIn;
  set(skuId: string, leafId: string, observed: number): HistoryRowIn;
  transfer(skuId: string, fromLeafId: string, toLeafId: string, qty: number): [HistoryRowIn, HistoryRowIn];
  addSku(): string;
  removeSku(skuId: string): void;
  renameSku(skuId: string, name: string): void;
  lateRow(skuId: string, leafId: string, delta: number, agoMs: number): HistoryRowIn;
  markDirty(skuId: string, leafId: string, status: (typeof FRESHNESS_NOT_CLEAN)[number]): void;
  settle(skuId?: string, leafId?: string): number;
}

export interface ChurnSummary {
  fraction: number;
  /** Existing SKUs picked for a mutation. */
  picked: number;
  movements: number;
  sets: number;
  transfers: number;
  lateRows: number;
  dirtied: number;
  settled: number;
  renamed: string[];
  removed: string[];
  added: string[];
  /** Every SKU id whose list item, detail or history changed (including added and removed), sorted. */
  changedSkuIds: string[];
}

type Op = "movement" | "set" | "transfer" | "late" | "dirty" | "settle" | "rename" | "remove";
const OPS: readonly (readonly [Op, number])[] = [
  ["movement", 40],
  ["set", 15],
  ["transfer", 12],
  ["late", 8],
  ["dirty", 6],
  ["settle", 6],
  ["rename", 8],
  ["remove", 5],
];
/** Per picked SKU, the chance that a brand-new SKU is also added (and receives stock). */
const ADD_CHANCE = 0.05;

/** What every churn operation works with. */
interface Churn {
  model: ChurnTarget;
  rng: Rng;
  summary: ChurnSummary;
  allLeaves: readonly number[];
  leafId(leaf: number): string;
  /** A receipt of 1–30 at `leaf`: the fallback of an operation that finds nothing to act on. */
  receipt(id: string, leaf: number): void;
}

/** The SKU an operation acts on, with the projections it may choose from. */
interface Target {
  id: string;
  sku: SkuState;
  /** Projections with stock at an active leaf. */
  stocked: SkuState["projections"];
  /** Projections with at least one history row. */
  withRows: SkuState["projections"];
}

export function randomChurn(model: ChurnTarget, fraction: number, rng: Rng): ChurnSummary {
  if (!(fraction >= 0 && fraction <= 1)) throw new RangeError(`fraction must be in [0, 1], got ${fraction}`);
  const picked = pickSkus(model.skuIds(), fraction, rng);
  const summary = emptySummary(fraction, picked.length);
  const churn = churnContext(model, rng, summary);
  const changed = new Set<string>();
  const state = model.state;
  for (const id of picked) {
    const sku = state.byId.get(id) as SkuState;
    const stocked = sku.projections.filter((p) => p.balance > 0 && state.locations[p.leaf]!.active);
    const withRows = sku.projections.filter((p) => p.rowCount > 0);
    const op = rng.weighted(OPS);
    changed.add(id);
    APPLY[op](churn, { id, sku, stocked, withRows });
    if (rng.chance(ADD_CHANCE)) {
      const added = model.addSku();
      churn.receipt(added, rng.pick(churn.allLeaves));
      summary.added.push(added);
      changed.add(added);
    }
  }
  summary.changedSkuIds = [...changed].sort();
  return summary;
}

/** `fraction` of the SKUs (at least one when the fraction is not 0), distinct, by a partial Fisher–Yates shuffle. */
function pickSkus(ids: string[], fraction: number, rng: Rng): string[] {
  const k = fraction > 0 && ids.length > 0 ? Math.max(1, Math.round(fraction * ids.length)) : 0;
  for (let i = 0; i < k; i++) {
    const j = i + rng.int(ids.length - i);
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  return ids.slice(0, k);
}

function emptySummary(fraction: number, picked: number): ChurnSummary {
  return {
    fraction,
    picked,
    movements: 0,
    sets: 0,
    transfers: 0,
    lateRows: 0,
    dirtied: 0,
    settled: 0,
    renamed: [],
    removed: [],
    added: [],
    changedSkuIds: [],
  };
}

function churnContext(model: ChurnTarget, rng: Rng, summary: ChurnSummary): Churn {
  const state = model.state;
  const leafId = (leaf: number): string => state.locations[leaf]!.id;
  return {
    model,
    rng,
    summary,
    allLeaves: state.leaves,
    leafId,
    receipt(id, leaf) {
      model.movement(id, leafId(leaf), rng.range(1, 30));
      summary.movements++;
    },
  };
}

/** A leaf the SKU has history at, or any leaf when it has none. */
function leafWithRows(c: Churn, t: Target): number {
  return t.withRows.length ? c.rng.pick(t.withRows).leaf : c.rng.pick(c.allLeaves);
}

/** Each operation, in the model's own mutations. The order of the rng calls is part of the seed's meaning: keep it. */
const APPLY: Record<Op, (c: Churn, t: Target) => void> = {
  movement(c, t) {
    if (t.stocked.length && c.rng.chance(0.5)) {
      const p = c.rng.pick(t.stocked);
      c.model.movement(t.id, c.leafId(p.leaf), -c.rng.range(1, p.balance));
      c.summary.movements++;
    } else c.receipt(t.id, t.withRows.length && c.rng.chance(0.8) ? c.rng.pick(t.withRows).leaf : c.rng.pick(c.allLeaves));
  },
  set(c, t) {
    const leaf = leafWithRows(c, t);
    const before = c.model.balance(t.id, c.leafId(leaf));
    // About a third confirm the count they find (a delta-0 row).
    c.model.set(t.id, c.leafId(leaf), c.rng.chance(0.35) ? before : Math.max(0, before + c.rng.range(-5, 5)));
    c.summary.sets++;
  },
  transfer(c, t) {
    const locations = c.model.state.locations;
    const pairs = t.stocked.flatMap((p) => c.allLeaves.filter((l) => l !== p.leaf && locations[l]!.root === locations[p.leaf]!.root).map((to) => [p, to] as const));
    if (!pairs.length) {
      c.receipt(t.id, c.rng.pick(c.allLeaves));
      return;
    }
    const [from, to] = c.rng.pick(pairs);
    c.model.transfer(t.id, c.leafId(from.leaf), c.leafId(to), c.rng.range(1, from.balance));
    c.summary.transfers++;
  },
  late(c, t) {
    const leaf = leafWithRows(c, t);
    const agoMs = c.rng.range(1, 30 * 86_400_000);
    try {
      // Mostly late receipts; a late outflow is tried but refused when it would dip below zero.
      c.model.lateRow(t.id, c.leafId(leaf), c.rng.chance(0.3) ? -c.rng.range(1, 3) : c.rng.range(1, 10), agoMs);
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      c.model.lateRow(t.id, c.leafId(leaf), c.rng.range(1, 10), agoMs);
    }
    c.summary.lateRows++;
  },
  dirty(c, t) {
    const leaf = leafWithRows(c, t);
    c.model.markDirty(t.id, c.leafId(leaf), c.rng.pick(FRESHNESS_NOT_CLEAN));
    c.summary.dirtied++;
    // A dirty projection only shows once something is not reflected.
    c.receipt(t.id, leaf);
  },
  settle(c, t) {
    const n = c.model.settle(t.id);
    if (n) c.summary.settled += n;
    else c.receipt(t.id, c.rng.pick(c.allLeaves));
  },
  rename(c, t) {
    c.model.renameSku(t.id, `${t.sku.name} (rev ${c.rng.range(2, 9)})`);
    c.summary.renamed.push(t.id);
  },
  remove(c, t) {
    c.model.removeSku(t.id);
    c.summary.removed.push(t.id);
  },
};
