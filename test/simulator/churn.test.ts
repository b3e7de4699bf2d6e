/**
 * Mutations (each one alone, then random churn): invariants still hold, the ground truth
 * and the endpoints show the change, and cursors survive mutations mid-walk.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createModel, startSimulator, TIMELINE_END, type GroundTruth, type RunningSimulator, type SimModel } from "../../src/simulator/index.js";
import { API, checkInvariants, get, walkHistory, walkList } from "./helpers.js";

/** Upper bound for walk loops: a broken keyset must fail the test, not spin forever. */
function full0Length(s: { history: unknown[] }): number {
  return s.history.length + 10;
}

function entry(gt: GroundTruth, id: string) {
  return gt.skus.find((s) => s.item.id === id);
}

/** A model with a fixed clock and helpers to find suitable SKUs / leaves. */
function setup(seed = 77) {
  let clock = Date.UTC(2026, 6, 1);
  const model = createModel({ seed, skus: 120, now: () => clock });
  const gt = model.groundTruth();
  const locs = gt.locations as any[];
  const leaves = locs.filter((l) => l.isLeaf && l.status === "active");
  const rootOf = (leafId: string) => locs.find((l) => l.id === leafId).pathIds[0];
  const stocked = (m: SimModel) =>
    m
      .groundTruth()
      .skus.flatMap((s) =>
        (s.detail.locations as any[]).filter((l) => l.freshness.status === "clean" && l.quantity > 2).map((l) => ({ sku: s.item.id as string, leaf: l.id as string, qty: l.quantity as number })),
      );
  return { model, gt, locs, leaves, rootOf, stocked, tick: (ms = 1000) => (clock += ms) };
}

describe("single mutations", () => {
  it("movement in and out: a new newest row, quantities follow, invariants hold", () => {
    const { model, stocked, tick } = setup();
    const { sku, leaf, qty } = stocked(model)[0]!;
    tick();
    const row = model.movement(sku, leaf, 5);
    expect(row).toMatchObject({ kind: "movement", direction: "in", quantity: 5, locationId: leaf, eventTypeCode: "receipt" });
    let gt = model.groundTruth();
    const e = entry(gt, sku)!;
    expect(e.history[0]).toEqual(row);
    expect((e.detail.locations as any[]).find((l) => l.id === leaf).quantity).toBe(qty + 5);
    expect(checkInvariants(gt)).toEqual([]);
    tick();
    model.movement(sku, leaf, -(qty + 5));
    gt = model.groundTruth();
    expect((entry(gt, sku)!.detail.locations as any[]).find((l) => l.id === leaf).quantity).toBe(0);
    expect(checkInvariants(gt)).toEqual([]);
    expect(() => model.movement(sku, leaf, -1)).toThrow(RangeError);
    expect(() => model.movement(sku, leaf, 0)).toThrow(RangeError);
    expect(checkInvariants(model.groundTruth())).toEqual([]);
  });

  it("new rows are stamped strictly after every stored row, even with a clock behind the timeline", () => {
    const model = createModel({ seed: 3, skus: 20, now: () => 0 });
    const gt = model.groundTruth();
    const newest = Math.max(...gt.skus.flatMap((s) => (s.history as any[]).map((r) => Date.parse(r.occurredAt))));
    expect(newest).toBeLessThanOrEqual(TIMELINE_END);
    const leaf = (gt.locations as any[]).find((l) => l.isLeaf && l.status === "active").id;
    const a = model.movement(gt.skus[0]!.item.id, leaf, 1);
    const b = model.movement(gt.skus[1]!.item.id, leaf, 1);
    expect(Date.parse(a.occurredAt)).toBeGreaterThan(newest);
    expect(Date.parse(b.occurredAt)).toBeGreaterThan(Date.parse(a.occurredAt));
    expect(a.occurredAt).toMatch(/\.\d{3}Z$/);
  });

  it("set: the row carries observed − balance (0 when confirming), and the count becomes the balance", () => {
    const { model, stocked, tick } = setup();
    const { sku, leaf, qty } = stocked(model)[1]!;
    tick();
    const same = model.set(sku, leaf, qty);
    expect(same).toMatchObject({ kind: "set", quantity: 0, direction: "none", observedQuantity: qty, setTypeCode: "regular", eventId: null });
    tick();
    const less = model.set(sku, leaf, qty - 2);
    expect(less).toMatchObject({ quantity: -2, direction: "out", observedQuantity: qty - 2 });
    const gt = model.groundTruth();
    expect((entry(gt, sku)!.detail.locations as any[]).find((l) => l.id === leaf)).toMatchObject({
      quantity: qty - 2,
      freshness: { status: "clean", lastSourceKind: "set", lastReplayedAt: less.occurredAt },
    });
    expect(checkInvariants(gt)).toEqual([]);
    expect(() => model.set(sku, leaf, -1)).toThrow(RangeError);
  });

  it("transfer: two rows, one event id and time, within one root; totals unchanged", () => {
    const { model, stocked, leaves, rootOf, tick } = setup();
    const { sku, leaf, qty } = stocked(model)[2]!;
    const to = leaves.find((l) => l.id !== leaf && rootOf(l.id) === rootOf(leaf))!.id;
    const otherRoot = leaves.find((l) => rootOf(l.id) !== rootOf(leaf))!.id;
    const before = entry(model.groundTruth(), sku)!.item.totalQuantity;
    tick();
    const [out, inn] = model.transfer(sku, leaf, to, qty);
    expect(out).toMatchObject({ direction: "out", eventTypeCode: "transfer_out", quantity: qty, locationId: leaf });
    expect(inn).toMatchObject({ direction: "in", eventTypeCode: "transfer_in", quantity: qty, locationId: to, eventId: out.eventId, occurredAt: out.occurredAt });
    const gt = model.groundTruth();
    expect(entry(gt, sku)!.item.totalQuantity).toBe(before);
    expect(checkInvariants(gt)).toEqual([]);
    expect(() => model.transfer(sku, to, otherRoot, 1)).toThrow(/same root/);
    expect(() => model.transfer(sku, leaf, to, 1)).toThrow(RangeError); // leaf is empty now
    expect(() => model.transfer(sku, to, to, 1)).toThrow(RangeError);
  });

  it("addSku, renameSku, removeSku", () => {
    const { model, leaves, tick } = setup();
    const id = model.addSku();
    let gt = model.groundTruth();
    const added = entry(gt, id)!;
    expect(added.history).toEqual([]);
    expect(added.item.totalQuantity).toBe(0);
    expect(gt.skus.map((s) => s.item.id)).toEqual([...gt.skus.map((s) => s.item.id)].sort());
    tick();
    model.movement(id, leaves[0].id, 9);
    model.renameSku(id, "Renamed Widget");
    gt = model.groundTruth();
    expect(entry(gt, id)!.item).toMatchObject({ name: "Renamed Widget", totalQuantity: 9 });
    expect(entry(gt, id)!.detail.sku.name).toBe("Renamed Widget");
    expect(checkInvariants(gt)).toEqual([]);
    const count = gt.skus.length;
    model.removeSku(id);
    gt = model.groundTruth();
    expect(gt.skus).toHaveLength(count - 1);
    expect(entry(gt, id)).toBeUndefined();
    expect(() => model.detail(id)).toThrow();
    expect(checkInvariants(gt)).toEqual([]);
    // ids of added SKUs are deterministic too
    const again = setup().model.addSku();
    expect(again).toBe(setup().model.addSku());
  });

  it("lateRow: older than the newest row; later SET deltas are recomputed; negatives refused", () => {
    const { model, tick } = setup();
    // a clean leaf with a SET that has at least one older row before it
    const gt0 = model.groundTruth();
    let pick: { sku: string; leaf: string; set: any } | null = null;
    for (const s of gt0.skus) {
      for (const d of s.detail.locations as any[]) {
        if (d.freshness.status !== "clean") continue;
        const rows = (s.history as any[]).filter((r) => r.locationId === d.id);
        const setIdx = rows.findIndex((r) => r.kind === "set");
        if (setIdx >= 0 && setIdx < rows.length - 1) pick = { sku: s.item.id, leaf: d.id, set: rows[setIdx] };
      }
      if (pick) break;
    }
    expect(pick).not.toBeNull();
    const { sku, leaf, set } = pick!;
    const newest = Date.parse(entry(gt0, sku)!.history[0]!.occurredAt);
    const ago = newest - Date.parse(set.occurredAt) + 1000; // lands before that SET
    tick();
    const late = model.lateRow(sku, leaf, 4, ago);
    expect(Date.parse(late.occurredAt)).toBe(newest - ago);
    const gt = model.groundTruth();
    const e = entry(gt, sku)!;
    expect(e.history[0]!.occurredAt).not.toBe(late.occurredAt);
    expect(e.history).toContainEqual(late);
    const setAfter = (e.history as any[]).find((r) => r.setSessionId === set.setSessionId && r.locationId === leaf);
    expect(setAfter.quantity).toBe(set.quantity - 4);
    expect(setAfter.observedQuantity).toBe(set.observedQuantity);
    expect(checkInvariants(gt)).toEqual([]);
    // a late outflow larger than what was there at that time is refused and changes nothing
    const snapshot = JSON.stringify(model.groundTruth());
    expect(() => model.lateRow(sku, leaf, -1_000_000, ago)).toThrow(RangeError);
    expect(JSON.stringify(model.groundTruth())).toBe(snapshot);
  });

  it("markDirty: new rows are not reflected until settle", () => {
    const { model, stocked, tick } = setup();
    const { sku, leaf, qty } = stocked(model)[3]!;
    const before = (entry(model.groundTruth(), sku)!.detail.locations as any[]).find((l) => l.id === leaf);
    model.markDirty(sku, leaf, "rebuilding");
    tick();
    model.movement(sku, leaf, 3);
    tick();
    model.set(sku, leaf, 100);
    let gt = model.groundTruth();
    let d = (entry(gt, sku)!.detail.locations as any[]).find((l) => l.id === leaf);
    expect(d).toMatchObject({ quantity: qty, freshness: { status: "rebuilding", lastReplayedAt: before.freshness.lastReplayedAt } });
    expect(entry(gt, sku)!.unreflected[leaf]).toBe(2);
    expect(checkInvariants(gt)).toEqual([]);
    // a late row at a lagging leaf is not reflected either
    tick();
    model.lateRow(sku, leaf, 1, 5);
    gt = model.groundTruth();
    expect(entry(gt, sku)!.unreflected[leaf]).toBeGreaterThanOrEqual(3);
    expect(checkInvariants(gt)).toEqual([]);
    expect(model.settle(sku, leaf)).toBe(1);
    gt = model.groundTruth();
    d = (entry(gt, sku)!.detail.locations as any[]).find((l) => l.id === leaf);
    expect(d).toMatchObject({ quantity: 100, freshness: { status: "clean", lastSourceKind: "set" } });
    expect(entry(gt, sku)!.unreflected[leaf]).toBe(0);
    expect(checkInvariants(gt)).toEqual([]);
  });

  it("markDirty on a leaf with no rows yet, then the first row arrives unreflected", () => {
    const { model, leaves, tick } = setup();
    const id = model.addSku();
    model.markDirty(id, leaves[1].id);
    expect(entry(model.groundTruth(), id)!.detail.locations).toEqual([]);
    tick();
    model.movement(id, leaves[1].id, 4);
    const gt = model.groundTruth();
    expect(entry(gt, id)!.detail.locations).toEqual([expect.objectContaining({ quantity: 0, freshness: { status: "dirty", lastReplayedAt: null, lastSourceKind: null } })]);
    expect(checkInvariants(gt)).toEqual([]);
    model.settle();
    expect(entry(model.groundTruth(), id)!.item.totalQuantity).toBe(4);
    expect(model.groundTruth().skus.every((s) => (s.detail.locations as any[]).every((l) => l.freshness.status === "clean"))).toBe(true);
  });

  it("refuses locations that are not active leaves", () => {
    const { model, locs, gt } = setup();
    const id = gt.skus[0]!.item.id;
    for (const l of locs.filter((x) => !x.isLeaf || x.status !== "active")) expect(() => model.movement(id, l.id, 1)).toThrow(RangeError);
  });
});

describe("randomChurn", () => {
  it("keeps every invariant, changes exactly the SKUs it reports, and is deterministic", () => {
    const a = setup(5);
    const b = setup(5);
    for (let round = 0; round < 6; round++) {
      const before = a.model.groundTruth();
      a.tick(60_000);
      b.tick(60_000);
      const summary = a.model.randomChurn(0.1);
      expect(b.model.randomChurn(0.1)).toEqual(summary);
      const after = a.model.groundTruth();
      expect(checkInvariants(after)).toEqual([]);
      expect(summary.picked).toBe(Math.round(0.1 * before.skus.length));
      const changed = new Set(summary.changedSkuIds);
      // everything not reported is byte-identical; everything reported (but removed) is gone
      for (const s of before.skus) {
        const now = entry(after, s.item.id);
        if (!changed.has(s.item.id)) expect(JSON.stringify(now)).toBe(JSON.stringify(s));
      }
      for (const id of summary.removed) expect(entry(after, id)).toBeUndefined();
      for (const id of summary.added) expect(entry(after, id)).toBeDefined();
      for (const id of summary.renamed) expect(entry(after, id)!.item.name).not.toBe(entry(before, id)!.item.name);
      const ops = summary.movements + summary.sets + summary.transfers + summary.lateRows + summary.dirtied + summary.settled + summary.renamed.length + summary.removed.length;
      expect(ops).toBeGreaterThanOrEqual(summary.picked);
      expect(JSON.stringify(b.model.groundTruth())).toBe(JSON.stringify(after));
    }
  });

  it("a reported change is a real change", () => {
    const { model, tick } = setup(9);
    const before = model.groundTruth();
    tick();
    const summary = model.randomChurn(0.2);
    const after = model.groundTruth();
    for (const id of summary.changedSkuIds) {
      const was = entry(before, id);
      const now = entry(after, id);
      expect(JSON.stringify(was) === JSON.stringify(now), id).toBe(false);
    }
  });

  it("survives heavy churn at scale", () => {
    const { model, tick } = setup(13);
    for (let i = 0; i < 10; i++) {
      tick(1);
      model.randomChurn(0.5);
    }
    expect(checkInvariants(model.groundTruth())).toEqual([]);
    expect(() => model.randomChurn(1.5)).toThrow(RangeError);
  });
});

describe("over HTTP", () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await startSimulator({ seed: 31, skus: 150 });
  });
  afterAll(() => sim.close());

  it("list cursors survive mutations mid-walk: survivors once each, in order", async () => {
    const ids0 = sim.model.skuIds();
    const first = await get(sim, `${API}/inventory-status`, { limit: 20 });
    const seen: string[] = first.body.items.map((i: any) => i.id);
    // mutate ahead of and behind the cursor
    const ahead = ids0[100]!;
    sim.model.removeSku(ahead);
    sim.model.removeSku(ids0[5]!); // already served
    const added = sim.model.addSku();
    sim.model.randomChurn(0.2);
    let cursor = first.body.page.nextCursor;
    while (cursor && seen.length <= ids0.length + 50) {
      const r = await get(sim, `${API}/inventory-status`, { limit: 20, cursor });
      expect(r.status).toBe(200);
      seen.push(...r.body.items.map((i: any) => i.id));
      cursor = r.body.page.nextCursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual([...seen].sort());
    const now = new Set(sim.model.skuIds());
    for (const id of ids0) if (now.has(id)) expect(seen).toContain(id);
    expect(seen).not.toContain(ahead);
    if (added > first.body.items.at(-1).id && now.has(added)) expect(seen).toContain(added);
  });

  it("history cursors survive mutations mid-walk: new rows are newer than the cursor, late rows older are picked up", async () => {
    const gt = sim.groundTruth();
    const s = gt.skus.find((x) => x.history.length > 30)!;
    const leaf = (s.history as any[])[0].locationId;
    const page1 = await get(sim, `${API}/inventory-status/${s.item.id}/history`, { limit: 10 });
    const fresh = sim.model.movement(s.item.id, leaf, 2); // newest: not in the remaining pages
    const oldest = Date.parse((s.history as any[]).at(-1).occurredAt);
    // agoMs counts back from the SKU's newest row (now the fresh one): land before every row
    const late = sim.model.lateRow(s.item.id, leaf, 1, Date.parse(fresh.occurredAt) - oldest + 1);
    expect(Date.parse(late.occurredAt)).toBe(oldest - 1);
    const rest: any[] = [];
    let cursor = page1.body.page.nextCursor;
    while (cursor && rest.length <= full0Length(s)) {
      const r = await get(sim, `${API}/inventory-status/${s.item.id}/history`, { limit: 10, cursor });
      expect(r.status).toBe(200);
      rest.push(...r.body.items);
      cursor = r.body.page.nextCursor;
    }
    const full = entry(sim.groundTruth(), s.item.id)!.history as any[];
    // full = [new movement, the 10 rows of page 1, ...the rest, late row]: the walk continues
    // exactly after page 1, skips the newer row and ends with the late one.
    expect(page1.body.items).toEqual((s.history as any[]).slice(0, 10));
    expect(full[0]!.occurredAt > page1.body.items[0].occurredAt).toBe(true);
    expect(rest).toEqual(full.slice(11));
    expect(rest.at(-1)).toEqual(late);
    expect(checkInvariants(sim.groundTruth())).toEqual([]);
  });

  it("POST /_sim/churn applies churn and the endpoints show it", async () => {
    sim.resetStats();
    const before = sim.groundTruth();
    const res = await fetch(`${sim.baseUrl}/_sim/churn?fraction=0.1`, { method: "POST", headers: { authorization: `Bearer ${sim.apiKey}` } });
    expect(res.status).toBe(200);
    const summary = (await res.json()) as { picked: number; changedSkuIds: string[] };
    expect(summary.picked).toBe(Math.round(0.1 * before.skus.length));
    const after = sim.groundTruth();
    expect(checkInvariants(after)).toEqual([]);
    const walk = await walkList(sim, {}, 100);
    expect(walk.items.map((i) => i.id)).toEqual(after.skus.map((s) => s.item.id));
    expect(walk.items).toEqual(after.skus.map((s) => s.item));
    for (const id of summary.changedSkuIds.slice(0, 10)) {
      const e = entry(after, id);
      if (!e) continue;
      expect((await get(sim, `${API}/inventory-status/${id}`)).body).toEqual(e.detail);
      expect(await walkHistory(sim, id, null, 100)).toEqual(e.history);
    }
    expect(sim.stats().byEndpoint.list).toBe(walk.pages.length); // the admin call was not counted
  });
});
