/**
 * The shaper's variance options over real HTTP, each against the same workspace served plainly
 * (same seed): decimal quantities, upper-case ids, empty first pages, summaries on the first
 * page only, other location status values. Data options change what is sent and the ground
 * truth alike; presentation options change only what is sent. Every body still parses with the
 * client's schemas.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DetailResponse, HistoryResponse, HistoryRow, ListResponse, LocationsResponse, WorkspaceResponse } from "../../src/core/api-schemas.js";
import { startSimulator, type GroundTruth, type RunningSimulator, type VarianceOptions } from "../../src/simulator/index.js";
import { profileOptions } from "../../src/simulator/profiles.js";
import { emptyFirstHistoryPage, Shaper } from "../../src/simulator/variance.js";
import { LiveWrites } from "../../src/simulator/live-writes.js";
import { unexplainedLeaves } from "../../src/sync/history-check.js";
import { API, get, walkHistory, walkList } from "./helpers.js";

const SEED = 17;
const SKUS = 40;
let plain: RunningSimulator;
let plainTruth: GroundTruth;
const started: RunningSimulator[] = [];

async function serve(variance: VarianceOptions): Promise<RunningSimulator> {
  const sim = await startSimulator({ seed: SEED, skus: SKUS, variance });
  started.push(sim);
  return sim;
}

beforeAll(async () => {
  plain = await serve({});
  plainTruth = plain.groundTruth();
});
afterAll(async () => {
  for (const s of started) await s.close();
});

const UUID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/;
const up = (id: string | null | undefined) => (typeof id === "string" ? id.toUpperCase() : id);
const dec = (q: number | null | undefined) => (typeof q === "number" ? q * 0.1 : q);
/** Every string in `v` that is a UUID. */
function uuidsIn(v: unknown, out: string[] = []): string[] {
  if (typeof v === "string" && UUID.test(v)) out.push(v);
  else if (Array.isArray(v)) for (const x of v) uuidsIn(x, out);
  else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      uuidsIn(k, out);
      uuidsIn(x, out);
    }
  }
  return out;
}
const skuWithHistory = (gt: GroundTruth, pages = 2) => gt.skus.find((s) => s.history.length > 20 * pages)!;

describe("variance options are validated", () => {
  it("refuses values outside each new option's choices", () => {
    const ws = { locations: () => ({ locations: [] }) };
    expect(() => new Shaper({ quantities: "float" as never }, ws)).toThrow(/variance.quantities must be one of integer, decimal/);
    expect(() => new Shaper({ idCase: "mixed" as never }, ws)).toThrow(/variance.idCase must be one of lower, upper/);
    expect(() => new Shaper({ emptyPages: 1 as never }, ws)).toThrow(/variance.emptyPages/);
    expect(() => new Shaper({ summaryOnce: "yes" as never }, ws)).toThrow(/variance.summaryOnce/);
    expect(new Shaper({}, ws).options).toMatchObject({ quantities: "integer", idCase: "lower", emptyPages: false, summaryOnce: false });
  });

  it("each new option has its own profile, and the bundles the end-to-end test runs include it", () => {
    expect(profileOptions(["decimal-quantities"]).variance).toEqual({ quantities: "decimal" });
    expect(profileOptions(["upper-case-ids"]).variance).toEqual({ idCase: "upper" });
    expect(profileOptions(["empty-pages"]).variance).toEqual({ emptyPages: true });
    expect(profileOptions(["summary-first-page"]).variance).toEqual({ summaryOnce: true });
    expect(profileOptions(["data-variance"]).variance).toMatchObject({ quantities: "decimal", idCase: "upper" });
    expect(profileOptions(["paging-variance"]).variance).toMatchObject({ emptyPages: true, summaryOnce: true });
    expect(profileOptions(["all-variance"]).variance).toMatchObject({ quantities: "decimal", idCase: "upper", emptyPages: true, summaryOnce: true });
  });
});

describe("quantities: decimal (data)", () => {
  let sim: RunningSimulator;
  let gt: GroundTruth;
  beforeAll(async () => {
    sim = await serve({ quantities: "decimal" });
    gt = sim.groundTruth();
  });

  it("every quantity sent is the integer x 0.1: list items, root summaries and summary, detail, history", async () => {
    const walk = await walkList(sim, {}, 100);
    const plainWalk = await walkList(plain, {}, 100);
    for (const page of walk.pages) expect(ListResponse.safeParse(page).success).toBe(true);
    expect(walk.items.map((i) => i.totalQuantity)).toEqual(plainWalk.items.map((i) => i.totalQuantity * 0.1));
    expect(walk.items.map((i) => i.locationQuantities)).toEqual(plainWalk.items.map((i) => Object.fromEntries(Object.entries(i.locationQuantities).map(([k, q]) => [k, dec(q as number)]))));
    expect(walk.summary).toEqual({ ...plainWalk.summary, totalQuantity: dec(plainWalk.summary.totalQuantity), averageQuantityPerSku: dec(plainWalk.summary.averageQuantityPerSku) });
    expect(walk.locations).toEqual(plainWalk.locations.map((r) => ({ ...r, totalQuantity: dec(r.totalQuantity), averageQuantityPerSku: dec(r.averageQuantityPerSku) })));
    // A scoped detail: selectedQuantity and totalQuantity both scaled.
    const s = skuWithHistory(plainTruth);
    const leaf = s.detail.locations[0]!;
    const [d, pd] = await Promise.all([sim, plain].map((x) => get(x, `${API}/inventory-status/${s.item.id}`, { scopeLocationId: leaf.id })));
    expect(DetailResponse.safeParse(d!.body).success).toBe(true);
    expect(d!.body).toEqual({
      ...pd!.body,
      selectedQuantity: pd!.body.selectedQuantity * 0.1,
      totalQuantity: pd!.body.totalQuantity * 0.1,
      locations: pd!.body.locations.map((l: any) => ({ ...l, quantity: l.quantity * 0.1 })),
    });
    const [h, ph] = await Promise.all([sim, plain].map((x) => get(x, `${API}/inventory-status/${s.item.id}/history`, { limit: 100 })));
    expect(HistoryResponse.safeParse(h!.body).success).toBe(true);
    expect(h!.body.items).toEqual(ph!.body.items.map((r: any) => ({ ...r, quantity: r.quantity * 0.1, observedQuantity: dec(r.observedQuantity) })));
    expect(h!.body.items.some((r: any) => r.kind === "set" && !Number.isInteger(r.observedQuantity))).toBe(true);
  });

  it("the ground truth is transformed the same way, and is what the endpoints serve", async () => {
    expect(gt.skus.map((s) => s.item)).toEqual(
      plainTruth.skus.map((s) => ({
        ...s.item,
        totalQuantity: s.item.totalQuantity * 0.1,
        locationQuantities: Object.fromEntries(Object.entries(s.item.locationQuantities!).map(([k, q]) => [k, q * 0.1])),
      })),
    );
    expect(gt.skus.map((s) => s.history)).toEqual(plainTruth.skus.map((s) => s.history.map((r) => ({ ...r, quantity: r.quantity * 0.1, observedQuantity: dec(r.observedQuantity) }))));
    expect(gt.locations).toEqual(plainTruth.locations);
    for (const s of gt.skus.slice(0, 10)) {
      expect((await get(sim, `${API}/inventory-status/${s.item.id}`)).body).toEqual(s.detail);
      expect(await walkHistory(sim, s.item.id, null, 100)).toEqual(s.history);
    }
  });

  it("history explains each clean leaf only within a tolerance: float noise shows, and the mirror's check allows for it", () => {
    let noisy = 0;
    for (const s of gt.skus) {
      // Replay the served rows oldest first with plain float arithmetic, as a strict client would.
      const balance = new Map<string, number>();
      for (const r of [...s.history].reverse()) {
        const signed = r.direction === "out" ? -Math.abs(r.quantity) : r.direction === "in" ? Math.abs(r.quantity) : r.quantity;
        balance.set(r.locationId, r.kind === "set" ? (r.observedQuantity as number) : (balance.get(r.locationId) ?? 0) + signed);
      }
      for (const l of s.detail.locations) {
        if (l.freshness?.status !== "clean") continue;
        const replayed = balance.get(l.id) ?? 0;
        expect(Math.abs(replayed - l.quantity)).toBeLessThan(1e-9);
        if (replayed !== l.quantity) noisy++;
      }
      expect(
        unexplainedLeaves(
          s.history.map((r) => HistoryRow.parse(r)),
          DetailResponse.parse(s.detail),
        ),
      ).toEqual([]);
    }
    expect(noisy, "some clean leaf whose exact float replay differs from its quantity").toBeGreaterThan(0);
  });
});

describe("idCase: upper (data)", () => {
  let sim: RunningSimulator;
  let gt: GroundTruth;
  beforeAll(async () => {
    sim = await serve({ idCase: "upper" });
    gt = sim.groundTruth();
  });

  it("every UUID of every endpoint is sent in upper case, and nothing else changes", async () => {
    const ws = await get(sim, `${API}/workspace`);
    expect(WorkspaceResponse.safeParse(ws.body).success).toBe(true);
    expect(ws.body.workspace.id).toBe(up(plainTruth.workspace.workspace.id));
    const locs = await get(sim, `${API}/locations`);
    expect(LocationsResponse.safeParse(locs.body).success).toBe(true);
    expect(locs.body.locations).toEqual(plainTruth.locations.map((n) => ({ ...n, id: up(n.id), parentId: up(n.parentId), pathIds: n.pathIds!.map(up) })));
    const s = skuWithHistory(plainTruth);
    const bodies = [
      (await walkList(sim, {}, 100)).pages,
      (await get(sim, `${API}/inventory-status/${s.item.id}`)).body,
      (await get(sim, `${API}/inventory-status/${s.item.id}/history`, { limit: 100 })).body,
      locs.body,
    ];
    const ids = uuidsIn(bodies);
    expect(ids.length).toBeGreaterThan(100);
    expect(ids.filter((id) => id !== id.toUpperCase())).toEqual([]);
    // The same bodies as the plain server's, once lower-cased.
    const lower = (v: unknown) => JSON.parse(JSON.stringify(v).replace(/"([0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12})"/g, (_, id: string) => `"${id.toLowerCase()}"`));
    expect(lower((await walkList(sim, {}, 100)).items)).toEqual((await walkList(plain, {}, 100)).items);
    expect(lower((await get(sim, `${API}/inventory-status/${s.item.id}/history`, { limit: 100 })).body)).toEqual(
      (await get(plain, `${API}/inventory-status/${s.item.id}/history`, { limit: 100 })).body,
    );
  });

  it("paths and query parameters are accepted in either case, cursors included", async () => {
    const s = skuWithHistory(gt, 2);
    const leaf = s.detail.locations[0]!.id;
    expect(leaf).toBe(leaf.toUpperCase());
    for (const [id, scope] of [
      [s.item.id, leaf],
      [s.item.id.toLowerCase(), leaf.toLowerCase()],
    ] as const) {
      const d = await get(sim, `${API}/inventory-status/${id}`, { scopeLocationId: scope });
      expect(d.status).toBe(200);
      expect(d.body.sku.id).toBe(s.item.id);
      expect(d.body.locations.map((l: any) => l.id)).toEqual([leaf]);
      const rows = await walkHistory(sim, id, null, 20);
      expect(rows).toEqual(s.history);
      const scoped = await get(sim, `${API}/inventory-status`, { scopeLocationId: scope, limit: 5 });
      expect(scoped.status).toBe(200);
      expect(Object.keys(scoped.body.items[0].locationQuantities)).toEqual([gt.locations.find((n) => n.id === leaf)!.pathIds![0]]);
    }
  });

  it("the ground truth holds the ids as sent; sim.listOrder() too", () => {
    expect(uuidsIn(gt).filter((id) => id !== id.toUpperCase())).toEqual([]);
    expect(sim.listOrder()).toEqual(plain.listOrder().map(up));
    expect(gt.skus.map((s) => s.item.id)).toEqual(plainTruth.skus.map((s) => up(s.item.id)));
    const leafIds = new Set(gt.locations.map((n) => n.id));
    for (const s of gt.skus) {
      expect(s.detail.sku.id).toBe(s.item.id);
      for (const r of s.history) expect(leafIds.has(r.locationId)).toBe(true);
      for (const l of s.detail.locations) expect(leafIds.has(l.id)).toBe(true);
      expect(Object.keys(s.unreflected).sort()).toEqual(s.detail.locations.map((l) => l.id).sort());
    }
  });
});

describe("emptyPages (presentation)", () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await serve({ emptyPages: true });
  });

  it("a list walk's first page is empty, with the root summaries and summary and a cursor to the real first page", async () => {
    const first = await get(sim, `${API}/inventory-status`, { limit: 10 });
    expect(ListResponse.safeParse(first.body).success).toBe(true);
    const plainFirst = await get(plain, `${API}/inventory-status`, { limit: 10 });
    expect(first.body.items).toEqual([]);
    expect(first.body.page.nextCursor).toEqual(expect.any(String));
    expect(first.body.summary).toEqual(plainFirst.body.summary);
    expect(first.body.locations).toEqual(plainFirst.body.locations);
    const real = await get(sim, `${API}/inventory-status`, { limit: 10, cursor: first.body.page.nextCursor });
    expect(real.body.items).toEqual(plainFirst.body.items);
    // A cursor-following walk ends with every SKU once, as the plain server's.
    expect((await walkList(sim, {}, 7)).items).toEqual((await walkList(plain, {}, 7)).items);
  });

  it("the history walk of every third SKU starts with an empty page; the others as before; the walk is the same", async () => {
    const chosen = plainTruth.skus.filter((s) => emptyFirstHistoryPage(s.item.id));
    expect(chosen.length).toBeGreaterThan(SKUS / 6);
    expect(chosen.length).toBeLessThan(SKUS / 2);
    for (const s of plainTruth.skus.slice(0, 12)) {
      const first = await get(sim, `${API}/inventory-status/${s.item.id}/history`, { limit: 20 });
      expect(HistoryResponse.safeParse(first.body).success).toBe(true);
      if (emptyFirstHistoryPage(s.item.id)) {
        expect(first.body.items).toEqual([]);
        expect(first.body.page.nextCursor).toEqual(expect.any(String));
        const real = await get(sim, `${API}/inventory-status/${s.item.id}/history`, { limit: 20, cursor: first.body.page.nextCursor });
        expect(real.body.items).toEqual(s.history.slice(0, 20));
      } else expect(first.body.items).toEqual(s.history.slice(0, 20));
      expect(await walkHistory(sim, s.item.id, null, 20)).toEqual(s.history);
    }
    // Upper case in the path picks the same SKUs (the choice is made on the id, case-blind).
    const s = chosen[0]!;
    expect((await get(sim, `${API}/inventory-status/${s.item.id.toUpperCase()}/history`)).body.items).toEqual([]);
    // An unknown SKU is still a 404, not an empty page.
    const unknown = "00000000-0000-4000-8000-000000000000";
    expect(emptyFirstHistoryPage(unknown)).toBe(true);
    expect((await get(sim, `${API}/inventory-status/${unknown}/history`)).status).toBe(404);
  });

  it("ground truth does not change", () => {
    expect(sim.groundTruth()).toEqual(plainTruth);
  });
});

describe("summaryOnce (presentation)", () => {
  let sim: RunningSimulator;
  beforeAll(async () => {
    sim = await serve({ summaryOnce: true });
  });

  it("locations and summary come on the first page only: the keys are left out of pages fetched with a cursor", async () => {
    const walk = await walkList(sim, {}, 7);
    const plainWalk = await walkList(plain, {}, 7);
    expect(walk.pages.length).toBeGreaterThan(2);
    expect(walk.pages[0]).toMatchObject({ summary: plainWalk.summary, locations: plainWalk.locations });
    for (const page of walk.pages.slice(1)) {
      expect(Object.keys(page).sort()).toEqual(["items", "page"]);
      expect(ListResponse.parse(page)).toMatchObject({ locations: [], summary: null });
    }
    expect(walk.items).toEqual(plainWalk.items);
    expect(sim.groundTruth()).toEqual(plainTruth);
  });

  it("with emptyPages, the empty first page carries them and the real first page (fetched with a cursor) does not", async () => {
    const both = await serve({ summaryOnce: true, emptyPages: true });
    const first = await get(both, `${API}/inventory-status`, { limit: 7 });
    expect(first.body).toMatchObject({ items: [], summary: expect.any(Object), locations: expect.any(Array) });
    const real = await get(both, `${API}/inventory-status`, { limit: 7, cursor: first.body.page.nextCursor });
    expect(real.body.items.length).toBe(7);
    expect("summary" in real.body || "locations" in real.body).toBe(false);
  });
});

describe("kinds: other, location status", () => {
  it("a location that is not active is sent, and held by the ground truth, with status archived; active ones stay active", async () => {
    const sim = await serve({ kinds: "other" });
    const served = (await get(sim, `${API}/locations`)).body.locations as any[];
    const statuses = (nodes: any[]) => nodes.map((n) => n.status);
    expect(statuses(plainTruth.locations)).toContain("inactive");
    expect(statuses(served)).toEqual(statuses(plainTruth.locations).map((s) => (s === "active" ? "active" : "archived")));
    expect(statuses(sim.groundTruth().locations)).toEqual(statuses(served));
  });
});

describe("all four at once (all-variance's data options)", () => {
  it("ground truth equals what a client walking every endpoint receives", async () => {
    const sim = await serve({ quantities: "decimal", idCase: "upper", emptyPages: true, summaryOnce: true });
    const gt = sim.groundTruth();
    expect((await get(sim, `${API}/workspace`)).body).toEqual(gt.workspace);
    expect((await get(sim, `${API}/locations`)).body.locations).toEqual(gt.locations);
    const pages: any[] = [];
    let cursor: string | null = null;
    do {
      const r: any = await get(sim, `${API}/inventory-status`, { limit: 9, cursor });
      pages.push(r.body);
      cursor = r.body.page.nextCursor;
    } while (cursor);
    expect(pages[0].items).toEqual([]);
    expect(pages.flatMap((p) => p.items)).toEqual(gt.skus.map((s) => s.item));
    for (const s of gt.skus.slice(0, 8)) {
      expect((await get(sim, `${API}/inventory-status/${s.item.id}`)).body).toEqual(s.detail);
      expect(await walkHistory(sim, s.item.id, null, 9)).toEqual(s.history);
    }
  });
});

describe("cursorPosition: offset (presentation) and live writes", () => {
  it("a static workspace walks the same by offset as by keyset: list and history, scoped too", async () => {
    const sim = await serve({ cursorPosition: "offset" });
    expect((await walkList(sim, {}, 7)).items).toEqual((await walkList(plain, {}, 7)).items);
    const root = plainTruth.locations.find((l) => l.parentId === null)!.id;
    expect((await walkList(sim, { scopeLocationId: root }, 9)).items).toEqual((await walkList(plain, { scopeLocationId: root }, 9)).items);
    for (const s of plainTruth.skus.slice(0, 8)) {
      expect(await walkHistory(sim, s.item.id, null, 6)).toEqual(s.history);
      expect(await walkHistory(sim, s.item.id, root, 4)).toEqual(await walkHistory(plain, s.item.id, root, 4));
    }
    expect(sim.groundTruth()).toEqual(plainTruth);
  });

  /** The first two pages of a SKU's history at `limit`, with one live write allowed between them. */
  async function twoPagesAcrossAWrite(position: "offset" | "keyset", skuId: string, limit: number) {
    const sim = await startSimulator({ seed: SEED, skus: SKUS, variance: { cursorPosition: position }, liveWrites: { history: 1 } });
    started.push(sim);
    const one = await get(sim, `${API}/inventory-status/${skuId}/history`, { limit });
    const two = await get(sim, `${API}/inventory-status/${skuId}/history`, { limit, cursor: one.body.page.nextCursor });
    return { sim, one: one.body.items as unknown[], two: two.body.items as unknown[] };
  }

  it("a row landing at the top between two history pages: by offset the next page begins with the last row again, by keyset it does not", async () => {
    const s = plainTruth.skus.find((t) => t.history.length > 12)!;
    const byOffset = await twoPagesAcrossAWrite("offset", s.item.id, 6);
    expect(byOffset.sim.liveWritesMade()).toEqual([{ kind: "history-row", skuId: s.item.id }]);
    expect(byOffset.one).toEqual(s.history.slice(0, 6));
    expect(byOffset.two[0]).toEqual(byOffset.one[5]);
    expect(byOffset.two.slice(1)).toEqual(s.history.slice(6, 11));
    // The write is in the ground truth: the SKU's newest row now.
    expect(
      byOffset.sim
        .groundTruth()
        .skus.find((t) => t.item.id === s.item.id)!
        .history.slice(1),
    ).toEqual(s.history);
    const byKeyset = await twoPagesAcrossAWrite("keyset", s.item.id, 6);
    expect(byKeyset.two).toEqual(s.history.slice(6, 12));
  });

  it("a SKU removed ahead of a list walk's position: by offset the walk skips one SKU it never removed; the removal is in ground truth", async () => {
    const sim = await startSimulator({ seed: SEED, skus: SKUS, variance: { cursorPosition: "offset" }, liveWrites: { listRemovals: 1 } });
    started.push(sim);
    const before = plain.listOrder();
    const ids = (await walkList(sim, {}, 5)).items.map((i: { id: string }) => i.id);
    const [removal] = sim.liveWritesMade();
    expect(removal).toEqual({ kind: "list-removal", skuId: before[0] });
    // Removed after the second page was served: the third page starts one SKU late.
    expect(ids).toEqual(before.filter((_, i) => i !== 10));
    expect(sim.groundTruth().skus.map((t) => t.item.id)).toEqual(before.slice(1));
  });

  it("a SKU created during a list walk: in the list at its id's place and in ground truth, written once", async () => {
    const sim = await startSimulator({ seed: SEED, skus: SKUS, variance: { cursorPosition: "offset" }, liveWrites: { listCreations: 1 } });
    started.push(sim);
    const before = plain.listOrder();
    await walkList(sim, {}, 5);
    const [creation, ...more] = sim.liveWritesMade();
    expect(more).toEqual([]);
    expect(creation!.kind).toBe("list-creation");
    expect(before).not.toContain(creation!.skuId);
    const after = sim.groundTruth().skus.map((t) => t.item.id);
    expect([...after].sort()).toEqual([...before, creation!.skuId].sort());
    // A second walk lists it where the list's order puts it, and writes nothing more.
    const ids = (await walkList(sim, {}, 5)).items.map((i: { id: string }) => i.id);
    expect(ids).toEqual(after);
    expect(sim.liveWritesMade()).toHaveLength(1);
  });

  it("live writes are refused when not a whole number, and each SKU gets one history write", () => {
    expect(() => new LiveWrites({ history: -1 }, plain.model)).toThrow(/liveWrites.history must be an integer >= 0/);
    expect(() => new LiveWrites({ listRemovals: 0.5 }, plain.model)).toThrow(/liveWrites.listRemovals/);
    expect(() => new LiveWrites({ listCreations: -2 }, plain.model)).toThrow(/liveWrites.listCreations/);
    expect(profileOptions(["offset-cursors"]).variance).toEqual({ cursorPosition: "offset" });
    expect(profileOptions(["paging-variance"]).variance).toMatchObject({ cursorPosition: "offset" });
  });
});
