/**
 * Generated data: determinism by seed, and the shape the brief asks for (location tree,
 * catalogue, history mix, projections), checked on the ground truth.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createModel, startSimulator, TIMELINE_END } from "../../src/simulator/index.js";
import { API, checkInvariants, get } from "./helpers.js";

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

afterEach(() => vi.restoreAllMocks());

describe("determinism", () => {
  it("same seed and options give byte-identical data; another seed gives other data", () => {
    const a = JSON.stringify(createModel({ seed: 7, skus: 300 }).groundTruth());
    const b = JSON.stringify(createModel({ seed: 7, skus: 300 }).groundTruth());
    const c = JSON.stringify(createModel({ seed: 8, skus: 300 }).groundTruth());
    const d = JSON.stringify(createModel({ seed: 7, skus: 300, historyDepth: 5 }).groundTruth());
    expect(a).toBe(b);
    expect(c).not.toBe(a);
    expect(d).not.toBe(a);
  });

  it("never draws from Math.random while generating", () => {
    const spy = vi.spyOn(Math, "random").mockImplementation(() => {
      throw new Error("Math.random used in a data path");
    });
    const model = createModel({ seed: 3, skus: 200 });
    model.randomChurn(0.1);
    model.groundTruth();
    expect(spy).not.toHaveBeenCalled();
  });

  it("the wall clock does not leak into generated data", () => {
    const a = JSON.stringify(createModel({ seed: 5, skus: 100, now: () => 0 }).groundTruth());
    const b = JSON.stringify(createModel({ seed: 5, skus: 100, now: () => 9e12 }).groundTruth());
    expect(a).toBe(b);
  });

  it("two servers with one seed send byte-identical responses (cursors included)", async () => {
    const s1 = await startSimulator({ seed: 11, skus: 120 });
    const s2 = await startSimulator({ seed: 11, skus: 120 });
    try {
      for (const path of ["/workspace", "/locations", "/inventory-status?limit=7&q=e"]) {
        const [r1, r2] = await Promise.all([get(s1, API + path), get(s2, API + path)]);
        expect(r1.status).toBe(200);
        expect(r1.text).toBe(r2.text);
      }
      const id = s1.model.skuIds()[5]!;
      const [h1, h2] = await Promise.all([get(s1, `${API}/inventory-status/${id}/history`, { limit: 3 }), get(s2, `${API}/inventory-status/${id}/history`, { limit: 3 })]);
      expect(h1.text).toBe(h2.text);
    } finally {
      await Promise.all([s1.close(), s2.close()]);
    }
  });
});

describe("generated data", () => {
  const model = createModel({ seed: 42, skus: 2000 });
  const gt = model.groundTruth();
  const locs = gt.locations as any[];

  // How fast it generates is the bench's business (npm run bench), not a timed test's.
  it("generates 2,000 SKUs, the same ones again from the same seed", () => {
    const a = createModel({ seed: 9, skus: 2000 }).groundTruth();
    expect(a.skus).toHaveLength(2000);
    expect(createModel({ seed: 9, skus: 2000 }).groundTruth()).toEqual(a);
  });

  it("satisfies every replay / ordering / transfer / totals invariant", () => {
    expect(checkInvariants(gt)).toEqual([]);
  });

  it("has a workspace with a v4 UUID and the read scope", () => {
    expect(gt.workspace.workspace.id).toMatch(UUID_V4);
    expect(gt.workspace.workspace.name).toBe("Simulated Workspace");
    expect(gt.workspace.scope).toBe("read");
  });

  it("builds a consistent root → section → leaf tree with one inactive leaf", () => {
    // 2 roots × (1 + 2 sections × (1 + 3 leaves)) + 1 retired shelf
    expect(locs).toHaveLength(2 * (1 + 2 * 4) + 1);
    const byId = new Map(locs.map((l) => [l.id, l]));
    for (const l of locs) {
      expect(l.id).toMatch(UUID_V4);
      const parent = l.parentId ? byId.get(l.parentId) : null;
      expect(l.parentName).toBe(parent ? parent.name : null);
      expect(l.depth).toBe(parent ? parent.depth + 1 : 0);
      expect(l.pathIds).toEqual(parent ? [...parent.pathIds, l.id] : [l.id]);
      expect(l.pathNames).toEqual(parent ? [...parent.pathNames, l.name] : [l.name]);
      expect(l.displayPath).toBe(l.pathNames.join(" / "));
      const children = locs.filter((c) => c.parentId === l.id);
      expect(l.childCount).toBe(children.length);
      expect(l.isLeaf).toBe(children.length === 0);
      expect(l.nodeKind).toBe(["location", "section", "leaf"][l.depth]);
      expect(l.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(Date.parse(l.updatedAt)).toBeLessThanOrEqual(TIMELINE_END);
    }
    expect(locs.filter((l) => l.depth === 0).map((l) => l.displayPath)).toEqual(["Warehouse A", "Warehouse B"]);
    const inactive = locs.filter((l) => l.status !== "active");
    expect(inactive).toHaveLength(1);
    const firstSection = locs.find((l) => l.depth === 1)!;
    expect(inactive[0]).toMatchObject({ status: "inactive", isLeaf: true, selectable: false, parentId: firstSection.id, depth: 2 });
    expect(firstSection.childCount).toBe(4);
    // no stock, no history at the inactive leaf
    for (const s of gt.skus) {
      expect((s.detail.locations as any[]).some((l) => l.id === inactive[0].id)).toBe(false);
      expect((s.history as any[]).some((r) => r.locationId === inactive[0].id)).toBe(false);
    }
  });

  it("has a catalogue of variants sharing products, with EAN-13 barcodes", () => {
    const byProduct = new Map<string, any[]>();
    for (const s of gt.skus) {
      const sku = s.item as any;
      expect(sku.id).toMatch(UUID_V4);
      expect(sku.product.id).toMatch(UUID_V4);
      expect(typeof sku.product.brand).toBe("string");
      expect(sku.barcode).toMatch(/^\d{13}$/);
      const digits = [...sku.barcode].map(Number);
      const sum = digits.slice(0, 12).reduce((a, d, i) => a + d * (i % 2 ? 3 : 1), 0);
      expect((10 - (sum % 10)) % 10).toBe(digits[12]);
      for (const v of Object.values(sku.options)) expect(typeof v).toBe("string");
      byProduct.set(sku.product.id, [...(byProduct.get(sku.product.id) ?? []), sku]);
    }
    const shared = [...byProduct.values()].filter((v) => v.length > 1);
    expect(shared.length).toBeGreaterThan(50);
    for (const group of shared) {
      expect(new Set(group.map((s) => JSON.stringify(s.options))).size).toBe(group.length);
      expect(new Set(group.map((s) => s.product.name + s.product.brand)).size).toBe(1);
    }
    expect(new Set(gt.skus.map((s) => (s.item as any).code)).size).toBe(gt.skus.length);
  });

  it("has a history mix: mean near historyDepth, SKUs with none and with > 100 rows", () => {
    const counts = gt.skus.map((s) => s.history.length);
    const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
    expect(mean).toBeGreaterThan(12 * 0.85);
    expect(mean).toBeLessThan(12 * 1.15);
    expect(counts.filter((c) => c === 0).length).toBeGreaterThan(20);
    expect(counts.filter((c) => c > 100).length).toBeGreaterThan(5);
    // forced roles hold for small datasets too
    const small = createModel({ seed: 1234, skus: 4 }).groundTruth();
    expect(small.skus.some((s) => s.history.length > 100)).toBe(true);
    expect(small.skus.some((s) => s.history.length === 0)).toBe(true);
    expect(small.skus.some((s) => Object.values(s.unreflected).some((n) => n > 0))).toBe(true);
  });

  it("has movements of every type, SETs (some confirming the count), transfers and shared timestamps", () => {
    const rows = gt.skus.flatMap((s) => s.history as any[]);
    const types = new Set(rows.filter((r) => r.kind === "movement").map((r) => r.eventTypeCode));
    expect([...types].sort()).toEqual(["adjustment", "receipt", "return", "shipment", "transfer_in", "transfer_out"]);
    const sets = rows.filter((r) => r.kind === "set");
    expect(sets.length).toBeGreaterThan(rows.length * 0.05);
    expect(sets.filter((r) => r.quantity === 0 && r.direction === "none").length).toBeGreaterThan(50);
    expect(sets.some((r) => r.direction === "in")).toBe(true);
    expect(sets.some((r) => r.direction === "out")).toBe(true);
    for (const r of rows) {
      expect(r.eventId ?? r.setSessionId).toMatch(UUID_V4);
      expect(Date.parse(r.occurredAt)).toBeLessThanOrEqual(TIMELINE_END);
    }
    // rows of one SET session: one occurredAt, distinct leaves
    for (const s of gt.skus) {
      const sessions = new Map<string, any[]>();
      for (const r of s.history as any[]) if (r.kind === "set") sessions.set(r.setSessionId, [...(sessions.get(r.setSessionId) ?? []), r]);
      for (const group of sessions.values()) {
        expect(new Set(group.map((r) => r.occurredAt)).size).toBe(1);
        expect(new Set(group.map((r) => r.locationId)).size).toBe(group.length);
      }
    }
    // event ids are unique workspace-wide (a transfer's two rows share one); so are SET session ids
    const rowsPerEvent = new Map<string, number>();
    for (const r of rows) if (r.kind === "movement") rowsPerEvent.set(r.eventId, (rowsPerEvent.get(r.eventId) ?? 0) + 1);
    const transferRows = rows.filter((r) => r.eventTypeCode?.startsWith("transfer")).length;
    expect(rowsPerEvent.size).toBe(rows.filter((r) => r.kind === "movement").length - transferRows / 2);
    const sessionsBySku = gt.skus.map((s) => new Set((s.history as any[]).filter((r) => r.kind === "set").map((r) => r.setSessionId)));
    const allSessions = new Set(sessionsBySku.flatMap((x) => [...x]));
    expect(allSessions.size).toBe(sessionsBySku.reduce((a, x) => a + x.size, 0));
    // many rows share an occurredAt within one SKU's history
    let sharing = 0;
    for (const s of gt.skus) {
      const seen = new Map<string, number>();
      for (const r of s.history as any[]) seen.set(r.occurredAt, (seen.get(r.occurredAt) ?? 0) + 1);
      for (const n of seen.values()) if (n > 1) sharing += n;
    }
    expect(sharing).toBeGreaterThan(rows.length * 0.05);
    expect(rows.filter((r) => r.eventTypeCode === "transfer_out").length).toBeGreaterThan(100);
  });

  it("leaves about 3 % of SKU × leaf projections not clean, lagging by 1–2 rows", () => {
    const pairs = gt.skus.flatMap((s) => (s.detail.locations as any[]).map((l) => ({ status: l.freshness.status, unref: s.unreflected[l.id] })));
    const notClean = pairs.filter((p) => p.status !== "clean");
    expect(notClean.length / pairs.length).toBeGreaterThan(0.01);
    expect(notClean.length / pairs.length).toBeLessThan(0.06);
    expect(new Set(notClean.map((p) => p.status))).toEqual(new Set(["dirty", "rebuilding", "failed"]));
    for (const p of notClean) expect([1, 2]).toContain(p.unref);
    for (const p of pairs.filter((x) => x.status === "clean")) expect(p.unref).toBe(0);
    const kinds = new Set(gt.skus.flatMap((s) => (s.detail.locations as any[]).map((l) => l.freshness.lastSourceKind)));
    expect(kinds).toEqual(new Set(["event", "set"]));
  });

  it("honours the shape options", () => {
    const m = createModel({ seed: 1, skus: 10, roots: 3, sectionsPerRoot: 1, leavesPerSection: 2, historyDepth: 0, workspaceName: "Demo" });
    const g = m.groundTruth();
    expect(g.workspace.workspace.name).toBe("Demo");
    expect(g.locations).toHaveLength(3 * (1 + 1 * 3) + 1);
    expect(g.skus).toHaveLength(10);
    expect(g.skus.every((s) => s.history.length === 0 && s.item.totalQuantity === 0)).toBe(true);
    expect(() => createModel({ roots: 0 })).toThrow(RangeError);
  });
});
