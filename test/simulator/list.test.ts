/**
 * The list endpoint over real HTTP: totals add up for every scope and stock state, `q`
 * filters, paging walks are exact for every page size, and every body parses with the
 * client's schemas.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DetailResponse, ListResponse, LocationsResponse, WorkspaceResponse } from "../../src/core/api-schemas.js";
import { startSimulator, type GroundTruth, type RunningSimulator } from "../../src/simulator/index.js";
import { API, get, leavesIn, rootOfLeaf, rootsIn, scopedQty, walkList } from "./helpers.js";

let sim: RunningSimulator;
let gt: GroundTruth;
let locs: any[];

beforeAll(async () => {
  sim = await startSimulator({ seed: 42, skus: 160 });
  gt = sim.groundTruth();
  locs = gt.locations as any[];
});
afterAll(() => sim.close());

describe("workspace and locations", () => {
  it("serve the ground truth and parse with the client's schemas", async () => {
    const ws = await get(sim, `${API}/workspace`);
    expect(ws.status).toBe(200);
    expect(ws.headers.get("content-type")).toMatch(/^application\/json/);
    expect(ws.body).toEqual(gt.workspace);
    expect(WorkspaceResponse.safeParse(ws.body).success).toBe(true);
    const l = await get(sim, `${API}/locations`);
    expect(l.body).toEqual({ locations: gt.locations });
    expect(LocationsResponse.safeParse(l.body).success).toBe(true);
  });
});

describe("totals for every scope and stock state", () => {
  const scopes = (): (string | null)[] => [null, ...locs.map((l) => l.id)];

  it("every scope × stockState: items, root summaries and summary agree with leaf quantities", async () => {
    const rootOf = rootOfLeaf(locs);
    const details = new Map(gt.skus.map((s) => [s.item.id, s.detail]));
    let checked = 0;
    for (const scope of scopes()) {
      const leaves = leavesIn(locs, scope);
      const roots = rootsIn(locs, scope);
      for (const stockState of ["all", "in_stock", "empty"] as const) {
        const walk = await walkList(sim, { scopeLocationId: scope, stockState: stockState === "all" ? undefined : stockState }, 100);
        for (const page of walk.pages) expect(ListResponse.safeParse(page).success).toBe(true);
        // expected membership from the ground truth's leaf quantities
        const expected = gt.skus.map((s) => ({ id: s.item.id, qty: scopedQty(s.detail, leaves) })).filter((x) => (stockState === "in_stock" ? x.qty > 0 : stockState === "empty" ? x.qty <= 0 : true));
        expect(walk.items.map((i) => i.id)).toEqual(expected.map((x) => x.id));
        let sum = 0;
        for (const item of walk.items) {
          const detail = details.get(item.id)!;
          expect(item.totalQuantity).toBe(scopedQty(detail, leaves));
          expect(Object.keys(item.locationQuantities).sort()).toEqual([...roots].sort());
          for (const r of roots) {
            const perRoot = (detail.locations as any[]).filter((l) => leaves.has(l.id) && rootOf.get(l.id) === r).reduce((a, l) => a + l.quantity, 0);
            expect(item.locationQuantities[r]).toBe(perRoot);
          }
          sum += item.totalQuantity;
        }
        expect(walk.summary.skuCount).toBe(walk.items.length);
        expect(walk.summary.totalQuantity).toBe(sum);
        expect(walk.summary.averageQuantityPerSku).toBeCloseTo(walk.items.length ? sum / walk.items.length : 0, 10);
        // root summaries
        expect(walk.locations.map((l) => l.id)).toEqual(roots);
        let rootSum = 0;
        for (const rs of walk.locations) {
          const root = locs.find((l) => l.id === rs.id);
          expect(rs).toMatchObject({ name: root.name, code: root.code, childCount: root.childCount });
          expect(rs.leafLocationIds.sort()).toEqual(
            locs
              .filter((l) => leaves.has(l.id) && rootOf.get(l.id) === rs.id)
              .map((l) => l.id)
              .sort(),
          );
          const withProjection = walk.items.filter((i) => (details.get(i.id)!.locations as any[]).some((l) => leaves.has(l.id) && rootOf.get(l.id) === rs.id));
          expect(rs.skuCount).toBe(withProjection.length);
          const total = walk.items.reduce((a, i) => a + i.locationQuantities[rs.id], 0);
          expect(rs.totalQuantity).toBe(total);
          expect(rs.averageQuantityPerSku).toBeCloseTo(rs.skuCount ? total / rs.skuCount : 0, 10);
          rootSum += rs.totalQuantity;
        }
        expect(rootSum).toBe(walk.summary.totalQuantity);
        checked++;
      }
    }
    expect(checked).toBe(3 * (locs.length + 1));
  });

  it("summary and root summaries are the same on every page (not paged)", async () => {
    const walk = await walkList(sim, { stockState: "in_stock" }, 30);
    expect(walk.pages.length).toBeGreaterThan(2);
    for (const page of walk.pages) {
      expect(page.summary).toEqual(walk.summary);
      expect(page.locations).toEqual(walk.locations);
    }
  });

  it("the inactive leaf scope has no leaves, no stock and reports its root with zeros", async () => {
    const inactive = locs.find((l) => l.status === "inactive");
    const r = await get(sim, `${API}/inventory-status`, { scopeLocationId: inactive.id, stockState: "in_stock" });
    expect(r.status).toBe(200);
    expect(r.body.items).toEqual([]);
    expect(r.body.summary).toEqual({ skuCount: 0, totalQuantity: 0, averageQuantityPerSku: 0 });
    expect(r.body.locations).toEqual([expect.objectContaining({ id: inactive.pathIds[0], leafLocationIds: [], skuCount: 0, totalQuantity: 0 })]);
    // and no root summary ever lists it
    const all = await get(sim, `${API}/inventory-status`, { limit: 1 });
    for (const rs of all.body.locations) expect(rs.leafLocationIds).not.toContain(inactive.id);
  });

  it("detail selectedQuantity equals the list total in the same scope; totalQuantity stays workspace-wide", async () => {
    const sample = gt.skus.filter((_, i) => i % 16 === 0);
    for (const scope of [locs[0].id, locs[1].id, locs.find((l) => l.isLeaf).id]) {
      const leaves = leavesIn(locs, scope);
      for (const s of sample) {
        const d = await get(sim, `${API}/inventory-status/${s.item.id}`, { scopeLocationId: scope });
        expect(d.status).toBe(200);
        expect(DetailResponse.safeParse(d.body).success).toBe(true);
        expect(d.body.selectedQuantity).toBe(scopedQty(s.detail, leaves));
        expect(d.body.totalQuantity).toBe(s.detail.totalQuantity);
        expect(d.body.locations).toEqual((s.detail.locations as any[]).filter((l) => leaves.has(l.id)));
        const li = await get(sim, `${API}/inventory-status`, { scopeLocationId: scope, q: (s.item as any).code });
        expect(li.body.items.find((i: any) => i.id === s.item.id).totalQuantity).toBe(d.body.selectedQuantity);
      }
    }
  });

  it("every detail served equals the ground truth", async () => {
    for (const s of gt.skus) {
      const d = await get(sim, `${API}/inventory-status/${s.item.id}`);
      expect(d.body).toEqual(s.detail);
    }
  });
});

describe("q filter", () => {
  const fields = (s: any): string[] => [s.item.product.name, s.item.code, s.item.skuCode, s.item.name, s.item.barcode];

  it("is a case-insensitive substring match over product name, code, skuCode, name and barcode", async () => {
    const first = gt.skus[3]!.item as any;
    const queries = [
      "shirt",
      "SHIRT",
      first.barcode.slice(4, 10),
      first.code,
      first.skuCode.toLowerCase(),
      first.product.name.split(" ")[1],
      "sku-0000",
      "zzz-no-such-thing",
      first.product.brand, // brand is not searched: matches only if it happens to occur in a searched field
    ];
    for (const q of queries) {
      const walk = await walkList(sim, { q }, 100);
      const expected = gt.skus.filter((s) => fields(s).some((f) => f.toLowerCase().includes(q.toLowerCase()))).map((s) => s.item.id);
      expect(
        walk.items.map((i) => i.id),
        q,
      ).toEqual(expected);
      expect(walk.summary.skuCount).toBe(expected.length);
    }
    expect((await walkList(sim, { q: "shirt" }, 100)).items.length).toBeGreaterThan(0);
    expect((await walkList(sim, { q: "zzz-no-such-thing" }, 100)).summary).toEqual({ skuCount: 0, totalQuantity: 0, averageQuantityPerSku: 0 });
  });

  it("does not match across two fields", async () => {
    const s = gt.skus[0]!.item as any;
    const across = `${s.code.slice(-2)}${s.skuCode.slice(0, 2)}`.toLowerCase();
    const walk = await walkList(sim, { q: across }, 100);
    const expected = gt.skus.filter((x) => fields(x).some((f) => f.toLowerCase().includes(across)));
    expect(walk.items.length).toBe(expected.length);
  });

  it("combines with scope and stockState", async () => {
    const scope = locs.find((l) => l.depth === 1).id;
    const leaves = leavesIn(locs, scope);
    const walk = await walkList(sim, { q: "e", scopeLocationId: scope, stockState: "in_stock" }, 100);
    const expected = gt.skus.filter((s) => fields(s).some((f) => f.toLowerCase().includes("e")) && scopedQty(s.detail, leaves) > 0).map((s) => s.item.id);
    expect(walk.items.map((i) => i.id)).toEqual(expected);
  });
});

describe("paging", () => {
  it("walks return each SKU exactly once, in id order, for every limit; skuCount equals the walk", async () => {
    const ids = gt.skus.map((s) => s.item.id);
    for (const limit of [1, 2, 7, 50, 80, 99, 100, undefined]) {
      // 80 divides 160: the last page is full and must still carry nextCursor null (no empty extra page).
      const walk = await walkList(sim, {}, limit);
      expect(walk.items.map((i) => i.id)).toEqual(ids);
      expect(new Set(walk.items.map((i) => i.id)).size).toBe(ids.length);
      expect(walk.summary.skuCount).toBe(ids.length);
      const size = limit ?? 50;
      expect(walk.pages.length).toBe(Math.ceil(ids.length / size));
      for (const [i, p] of walk.pages.entries()) expect(p.items.length).toBe(i < walk.pages.length - 1 ? size : ids.length - size * (walk.pages.length - 1));
      expect(walk.pages.at(-1).page.nextCursor).toBeNull();
    }
  });

  it("limit may change between pages", async () => {
    const first = await get(sim, `${API}/inventory-status`, { limit: 10 });
    const second = await get(sim, `${API}/inventory-status`, { limit: 25, cursor: first.body.page.nextCursor });
    expect(second.status).toBe(200);
    expect(second.body.items.map((i: any) => i.id)).toEqual(gt.skus.slice(10, 35).map((s) => s.item.id));
  });

  it("an empty result has no next cursor", async () => {
    const r = await get(sim, `${API}/inventory-status`, { q: "no-such-sku-anywhere" });
    expect(r.body.items).toEqual([]);
    expect(r.body.page.nextCursor).toBeNull();
  });
});
