/**
 * Writes that land while a client walks: a busy workspace, where stock moves between one page
 * of a walk and the next. The API document says nothing of how a walk sees such a write; with
 * keyset cursors (the simulator's default) a row or SKU added or removed ahead of the position
 * changes nothing after it, but with offset cursors (`variance.cursorPosition: "offset"`) the next
 * page shifts: a row added at the top of a history walk comes back as the first row of the next
 * page (twice in the walk, looking like an identical copy), a SKU removed from the list ahead of
 * the position makes the next page skip one SKU (missing from a walk that saw it exist). And a
 * SKU may be removed while its own history is walked: the next page answers 404. A SKU created
 * mid-walk lands at its id's place in the list: behind the position a walk misses it, ahead of
 * it the walk lists it, and either way the list's count moved.
 *
 * Each write is spent once; a budget of 0 (the default) writes nothing. The model takes every
 * write, so ground truth follows them.
 */
import type { SimModel } from "./model.js";

export interface LiveWriteOptions {
  /** How many history walks (of as many SKUs, one write each) get a new movement (the SKU's newest row) right after their first page, when more pages follow. */
  history?: number;
  /** How many list walks lose the first SKU of the list's order right after a page fetched with a cursor, when more pages follow. */
  listRemovals?: number;
  /** How many SKUs are removed right after the first page of their history walk, when more pages follow (the next page answers 404). */
  historyRemovals?: number;
  /** How many list walks gain a new SKU (no stock, no history; its place in the list's order is its id's) right after a page fetched with a cursor, when more pages follow. */
  listCreations?: number;
  /**
   * How many list walks see a SKU whose detail was already served lose all its stock right after a page fetched
   * with a cursor, when more pages follow (of those with stock, the one whose detail was served last). In the
   * `quantity` list order it moves behind the walk's position and is listed again, changed, after its detail was fetched.
   */
  listJumps?: number;
}

/** What a page served looked like, for deciding whether a write lands after it. */
export interface ServedPage {
  endpoint: "list" | "history" | "detail";
  /** Lower case; for history. */
  skuId: string | null;
  hasCursor: boolean;
  morePages: boolean;
  /** The leaf of the page's first history row, if any. */
  firstLeafId: string | null;
}

/** One write made: a new history row of a SKU, a SKU removed from the list or created. */
export interface LiveWrite {
  kind: "history-row" | "list-removal" | "history-removal" | "list-creation" | "list-jump";
  /** Lower case. */
  skuId: string;
}

export class LiveWrites {
  private history: number;
  private listRemovals: number;
  private historyRemovals: number;
  private listCreations: number;
  private listJumps: number;
  /** SKUs whose detail was served, in that order (kept while list jumps are left to make). */
  private readonly detailed: string[] = [];
  constructor(
    opts: LiveWriteOptions,
    private readonly model: SimModel,
    /** Writes made so far, newest last (for tests: which SKUs, which kind); a SKU gets one history write in all. */
    readonly made: LiveWrite[] = [],
  ) {
    this.history = nonNegative("history", opts.history ?? 0);
    this.listRemovals = nonNegative("listRemovals", opts.listRemovals ?? 0);
    this.historyRemovals = nonNegative("historyRemovals", opts.historyRemovals ?? 0);
    this.listCreations = nonNegative("listCreations", opts.listCreations ?? 0);
    this.listJumps = nonNegative("listJumps", opts.listJumps ?? 0);
  }

  /** Called after a page was served: a write may land before the client asks for the next. */
  afterPage(p: ServedPage): void {
    if (p.endpoint === "detail" && p.skuId !== null && this.listJumps > 0) this.detailed.push(p.skuId);
    if (!p.morePages) return;
    if (p.endpoint === "list" && p.hasCursor && this.listJumps > 0 && this.jump()) return;
    if (p.endpoint === "history" && !p.hasCursor && p.skuId !== null && this.historyRemovals > 0) {
      this.model.removeSku(p.skuId);
      this.historyRemovals--;
      this.made.push({ kind: "history-removal", skuId: p.skuId });
    } else if (p.endpoint === "history" && !p.hasCursor && p.skuId !== null && this.history > 0 && !this.made.some((w) => w.skuId === p.skuId)) {
      const leaf = this.leafFor(p.firstLeafId);
      if (leaf === null) return;
      this.model.movement(p.skuId, leaf, 1);
      this.history--;
      this.made.push({ kind: "history-row", skuId: p.skuId });
    } else if (p.endpoint === "list" && p.hasCursor && this.listRemovals > 0) {
      const first = this.model.listOrderIds()[0];
      if (first === undefined) return;
      this.model.removeSku(first);
      this.listRemovals--;
      this.made.push({ kind: "list-removal", skuId: first });
    } else if (p.endpoint === "list" && p.hasCursor && this.listCreations > 0) {
      this.listCreations--;
      this.made.push({ kind: "list-creation", skuId: this.model.addSku().toLowerCase() });
    }
  }

  /** listJumps: of the SKUs whose detail was served, the last served that still has stock loses all of it (a movement out at each leaf). */
  private jump(): boolean {
    const leaves = this.model.activeLeafIds();
    const current = new Set(this.model.skuIds());
    for (const id of [...this.detailed].reverse()) {
      if (!current.has(id)) continue;
      const stocked = leaves.filter((leaf) => this.model.balance(id, leaf) > 0);
      if (stocked.length === 0) continue;
      for (const leaf of stocked) this.model.movement(id, leaf, -this.model.balance(id, leaf));
      this.listJumps--;
      this.made.push({ kind: "list-jump", skuId: id });
      return true;
    }
    return false;
  }

  /** The page's own leaf when it is active, else the workspace's first active leaf. */
  private leafFor(firstLeafId: string | null): string | null {
    const active = this.model.activeLeafIds();
    if (firstLeafId !== null && active.includes(firstLeafId)) return firstLeafId;
    return active[0] ?? null;
  }
}

function nonNegative(name: string, n: number): number {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`liveWrites.${name} must be an integer >= 0, got ${JSON.stringify(n)}`);
  return n;
}
