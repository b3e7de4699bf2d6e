/**
 * The history profiles over real HTTP (issue 10 §4): identical rows where history-variance.ts
 * puts them (in one page, at rows 100/101, among ~150 ties), served exactly as the ground
 * truth has them at limit 100, and the served rows, both copies included, replay to the
 * detail quantities.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimulator, type GroundTruth, type RunningSimulator } from "../../src/simulator/index.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import { API, checkInvariants, get, walkHistory } from "./helpers.js";

let sim: RunningSimulator;
let gt: GroundTruth;

beforeAll(async () => {
  sim = await startSimulator({ seed: 9, skus: 30, ...profileOptions(["history-identical-rows", "history-ties"]) });
  gt = sim.groundTruth();
});
afterAll(() => sim.close());

const byIdx = (idx: number) => gt.skus.find((s) => s.item.id === sim.model.state.skus.find((k) => k.idx === idx)!.id)!;
const copies = (rows: unknown[]) => {
  const keys = rows.map((r) => JSON.stringify(r));
  return keys.flatMap((k, i) => (keys.indexOf(k) !== i ? [[keys.indexOf(k), i]] : []));
};

describe("history profiles", () => {
  it("pairs of identical rows sit in one page, at rows 100/101, and among ~150 ties; a tie run spans page boundaries", async () => {
    expect(copies(byIdx(3).history)).toEqual([[2, 3]]);
    expect(copies(byIdx(4).history)).toEqual([[99, 100]]);
    const ties = byIdx(5).history;
    expect(copies(ties)).toEqual([[120, 121]]);
    expect(ties.filter((r) => r.occurredAt === ties[121]!.occurredAt).length).toBeGreaterThanOrEqual(150);
    const run = byIdx(6).history;
    const at = run[100]!.occurredAt;
    expect(run[99]!.occurredAt).toBe(at);
    expect(run.filter((r) => r.occurredAt === at).length).toBeGreaterThanOrEqual(150);
    // The page boundary at limit 100 falls between the two copies.
    const first = await get(sim, `${API}/inventory-status/${byIdx(4).item.id}/history`, { limit: 100 });
    expect(first.body.items.at(-1)).toEqual(byIdx(4).history[99]);
    expect(first.body.page.nextCursor).toBeTruthy();
  });

  it("every history is served exactly (every copy) at limit 100 and at limit 7, and the served rows replay to the detail quantities", async () => {
    const served: GroundTruth = { ...gt, skus: [] };
    for (const s of gt.skus) {
      const rows = await walkHistory(sim, s.item.id, null, 100);
      expect(rows).toEqual(s.history);
      if (s.history.length > 100) expect(await walkHistory(sim, s.item.id, null, 7)).toEqual(s.history);
      served.skus.push({ ...s, history: rows });
    }
    expect(checkInvariants(served)).toEqual([]);
  });

  it("model.identicalCopy adds one more identical row next to its source, and it replays", () => {
    const s = byIdx(3);
    const row = sim.model.identicalCopy(s.item.id, 2);
    expect(row).toEqual(s.history[2]);
    const after = sim.groundTruth();
    const t = after.skus.find((x) => x.item.id === s.item.id)!;
    expect(copies(t.history)).toEqual([
      [2, 3],
      [2, 4],
    ]);
    expect(checkInvariants(after)).toEqual([]);
  });
});
