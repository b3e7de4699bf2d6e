/**
 * Random churn for incremental-sync tests: a seeded mix of the model's own mutations over
 * a fraction of the SKUs. It only calls public mutations, so every invariant those keep
 * holds after churn too; it reads the state only to choose valid arguments (a leaf that
 * has stock to ship, a pair of leaves under one root for a transfer).
 */
import type { SimModel } from "./model.js";
import type { Rng } from "./prng.js";
import type { SkuState } from "./types.js";
import { FRESHNESS_NOT_CLEAN } from "./vocabulary.js";

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

export function randomChurn(model: SimModel, fraction: number, rng: Rng): ChurnSummary {
  if (!(fraction >= 0 && fraction <= 1)) throw new RangeError(`fraction must be in [0, 1], got ${fraction}`);
  const ids = model.skuIds();
  const k = fraction > 0 && ids.length > 0 ? Math.max(1, Math.round(fraction * ids.length)) : 0;
  // Partial Fisher–Yates: k distinct SKUs.
  for (let i = 0; i < k; i++) {
    const j = i + rng.int(ids.length - i);
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  const picked = ids.slice(0, k);
  const summary: ChurnSummary = {
    fraction,
    picked: k,
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
  const changed = new Set<string>();
  const state = model.state;
  const leafId = (leaf: number): string => state.locations[leaf]!.id;
  const allLeaves = state.leaves;

  const receipt = (id: string, leaf: number): void => {
    model.movement(id, leafId(leaf), rng.range(1, 30));
    summary.movements++;
  };

  for (const id of picked) {
    const sku = state.byId.get(id) as SkuState;
    const stocked = sku.projections.filter((p) => p.balance > 0 && state.locations[p.leaf]!.active);
    const withRows = sku.projections.filter((p) => p.rowCount > 0);
    const op = rng.weighted(OPS);
    changed.add(id);
    switch (op) {
      case "movement":
        if (stocked.length && rng.chance(0.5)) {
          const p = rng.pick(stocked);
          model.movement(id, leafId(p.leaf), -rng.range(1, p.balance));
          summary.movements++;
        } else receipt(id, withRows.length && rng.chance(0.8) ? rng.pick(withRows).leaf : rng.pick(allLeaves));
        break;
      case "set": {
        const leaf = withRows.length ? rng.pick(withRows).leaf : rng.pick(allLeaves);
        const before = model.balance(id, leafId(leaf));
        // About a third confirm the count they find (a delta-0 row).
        model.set(id, leafId(leaf), rng.chance(0.35) ? before : Math.max(0, before + rng.range(-5, 5)));
        summary.sets++;
        break;
      }
      case "transfer": {
        const pairs = stocked.flatMap((p) =>
          allLeaves.filter((l) => l !== p.leaf && state.locations[l]!.root === state.locations[p.leaf]!.root).map((to) => [p, to] as const),
        );
        if (!pairs.length) {
          receipt(id, rng.pick(allLeaves));
          break;
        }
        const [from, to] = rng.pick(pairs);
        model.transfer(id, leafId(from.leaf), leafId(to), rng.range(1, from.balance));
        summary.transfers++;
        break;
      }
      case "late": {
        const leaf = withRows.length ? rng.pick(withRows).leaf : rng.pick(allLeaves);
        const agoMs = rng.range(1, 30 * 86_400_000);
        try {
          // Mostly late receipts; a late outflow is tried but refused when it would dip below zero.
          model.lateRow(id, leafId(leaf), rng.chance(0.3) ? -rng.range(1, 3) : rng.range(1, 10), agoMs);
        } catch (err) {
          if (!(err instanceof RangeError)) throw err;
          model.lateRow(id, leafId(leaf), rng.range(1, 10), agoMs);
        }
        summary.lateRows++;
        break;
      }
      case "dirty": {
        const leaf = withRows.length ? rng.pick(withRows).leaf : rng.pick(allLeaves);
        model.markDirty(id, leafId(leaf), rng.pick(FRESHNESS_NOT_CLEAN));
        summary.dirtied++;
        // A dirty projection only shows once something is not reflected.
        receipt(id, leaf);
        break;
      }
      case "settle": {
        const n = model.settle(id);
        if (n) summary.settled += n;
        else receipt(id, rng.pick(allLeaves));
        break;
      }
      case "rename":
        model.renameSku(id, `${sku.name} (rev ${rng.range(2, 9)})`);
        summary.renamed.push(id);
        break;
      case "remove":
        model.removeSku(id);
        summary.removed.push(id);
        break;
    }
    if (rng.chance(ADD_CHANCE)) {
      const added = model.addSku();
      receipt(added, rng.pick(allLeaves));
      summary.added.push(added);
      changed.add(added);
    }
  }
  summary.changedSkuIds = [...changed].sort();
  return summary;
}
