/**
 * The planner (src/sync/planner.ts): for each SKU a list page shows, whether this walk fetches
 * its detail and history, and why. Every reason each planner gives, and what takes precedence
 * when several apply; then the re-verification share.
 */
import { describe, expect, it } from "vitest";
import { ListItem } from "../../src/core/api-schemas.js";
import type { RunState } from "../../src/store/store.js";
import { planFull, planIncremental, reverifyShare } from "../../src/sync/planner.js";
import type { PreviousState } from "../../src/store/list.js";

/** This run belongs to walk 7; walk 5 is an earlier one. */
const THIS_WALK = 7;
const EARLIER_WALK = 5;
const run = (mode: RunState["mode"]): RunState => ({ id: 12, mode, walkId: THIS_WALK, listCursor: null, listDone: false, listWalkAgain: false, resumedFrom: null });

const item = ListItem.parse({ id: "11111111-1111-4111-8111-111111111111", name: "Bolt M6", totalQuantity: 40, locationQuantities: { root: 40 } });
const SEEN = "fingerprint-as-stored";
const MOVED = "fingerprint-of-a-changed-list-row";

/** A SKU fetched in an earlier walk, with the list row as stored, clean, nothing pending. */
const settled: PreviousState = { list_fingerprint: SEEN, fetched_walk_id: EARLIER_WALK, pending_walk_id: null, listed_walk_id: EARLIER_WALK, fail_count: 0, not_clean: 0 };
const prev = (p: Partial<PreviousState>): PreviousState => ({ ...settled, ...p });

type Case = [name: string, fingerprint: string, previous: PreviousState | undefined, reason: string | null];

describe("planFull: every listed SKU, once per walk", () => {
  const cases: Case[] = [
    ["never seen", SEEN, undefined, "new"],
    ["seen but never fetched (it failed every time)", SEEN, prev({ fetched_walk_id: null, fail_count: 3 }), "new"],
    ["fetched in an earlier walk, list row unchanged", SEEN, settled, "changed"],
    ["fetched in an earlier walk, list row changed", MOVED, settled, "changed"],
    ["fetched in an earlier walk, then failed", SEEN, prev({ fail_count: 2, pending_walk_id: EARLIER_WALK }), "changed"],
    ["already fetched by this walk (a resumed run)", SEEN, prev({ fetched_walk_id: THIS_WALK }), null],
    ["already fetched by this walk, list row changed since", MOVED, prev({ fetched_walk_id: THIS_WALK, not_clean: 1 }), null],
    // Listed earlier in this walk too, and changed since that listing: its detail may be from before the change.
    ["fetched and listed by this walk, listed again changed (movedInWalk)", MOVED, prev({ fetched_walk_id: THIS_WALK, listed_walk_id: THIS_WALK }), "changed"],
    ["fetched and listed by this walk, listed again unchanged", SEEN, prev({ fetched_walk_id: THIS_WALK, listed_walk_id: THIS_WALK }), null],
  ];
  it.each(cases)("%s -> %s", (_name, fingerprint, previous, reason) => {
    expect(planFull(run("full")).reason(item, fingerprint, previous)).toBe(reason);
  });
});

describe("planIncremental: only what the list shows may have changed, what is not settled, what was left undone", () => {
  const cases: Case[] = [
    ["never seen", MOVED, undefined, "new"],
    ["seen, never fetched, never failed", SEEN, prev({ fetched_walk_id: null }), "new"],
    ["seen, never fetched, failed before", SEEN, prev({ fetched_walk_id: null, fail_count: 1 }), "retried"],
    ["fetched, failed since (fail count)", SEEN, prev({ fail_count: 1 }), "retried"],
    ["fetched, left queued by an earlier walk", SEEN, prev({ pending_walk_id: EARLIER_WALK }), "retried"],
    ["fetched, queued by this walk (not a retry)", SEEN, prev({ pending_walk_id: THIS_WALK }), null],
    ["list row changed", MOVED, settled, "changed"],
    ["list row unchanged, stored freshness not clean", SEEN, prev({ not_clean: 1 }), "repolled"],
    ["list row unchanged, clean, nothing pending", SEEN, settled, null],
    // Precedence: done in this walk > retried > changed > repolled.
    ["already fetched by this walk, though changed, failed and not clean", MOVED, prev({ fetched_walk_id: THIS_WALK, fail_count: 2, not_clean: 1 }), null],
    ["fetched and listed by this walk, listed again changed (movedInWalk)", MOVED, prev({ fetched_walk_id: THIS_WALK, listed_walk_id: THIS_WALK }), "changed"],
    ["fetched and listed by this walk, listed again unchanged", SEEN, prev({ fetched_walk_id: THIS_WALK, listed_walk_id: THIS_WALK }), null],
    ["failed and changed", MOVED, prev({ fail_count: 1 }), "retried"],
    ["left queued by an earlier walk and not clean", SEEN, prev({ pending_walk_id: EARLIER_WALK, not_clean: 1 }), "retried"],
    ["changed and not clean", MOVED, prev({ not_clean: 1 }), "changed"],
  ];
  it.each(cases)("%s -> %s", (_name, fingerprint, previous, reason) => {
    expect(planIncremental(run("incremental")).reason(item, fingerprint, previous)).toBe(reason);
  });

  it("gives each of its four reasons", () => {
    const given = new Set(cases.map(([, , , reason]) => reason).filter((r) => r !== null));
    expect([...given].sort()).toEqual(["changed", "new", "repolled", "retried"]);
  });
});

describe("reverifyShare: every SKU re-verified within the window", () => {
  const MIN = 60_000;
  const DAY = 24 * 60 * MIN;
  it.each([
    // SKUs, interval, window, per cycle
    [10_000, 5 * MIN, DAY, 35], // 34.7, rounded up
    [288, 5 * MIN, DAY, 1], // exactly one
    [289, 5 * MIN, DAY, 2],
    [1, 5 * MIN, DAY, 1],
    [10_000, 2 * DAY, DAY, 10_000], // cycles longer than the window: everything, not more
    [0, 5 * MIN, DAY, 0],
    [10_000, 0, DAY, 0],
    [10_000, 5 * MIN, 0, 0],
    [-3, 5 * MIN, DAY, 0],
  ])("%i SKUs, every %i ms, window %i ms -> %i per cycle", (skus, interval, window, share) => {
    expect(reverifyShare(skus, interval, window)).toBe(share);
  });
});
