/**
 * The history endpoint over real HTTP: paging returns exactly the ground-truth rows in
 * order for every page size and scope, and the rows as served replay to the detail
 * quantities (the invariant checker runs on HTTP data, not on the simulator's state).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HistoryResponse } from "../../src/core/api-schemas.js";
import { startSimulator, type GroundTruth, type RunningSimulator } from "../../src/simulator/index.js";
import { API, checkInvariants, get, leavesIn, type Resp, walkHistory } from "./helpers.js";

let sim: RunningSimulator;
let gt: GroundTruth;
let locs: any[];

beforeAll(async () => {
  sim = await startSimulator({ seed: 42, skus: 120 });
  gt = sim.groundTruth();
  locs = gt.locations as any[];
});
afterAll(() => sim.close());

describe("history paging", () => {
  it("walks every SKU's history exactly, at the maximum page size", async () => {
    for (const s of gt.skus) expect(await walkHistory(sim, s.item.id, null, 100)).toEqual(s.history);
  });

  it("walks the big history exactly for every page size (default 20 included)", async () => {
    const big = gt.skus.reduce((a, b) => (b.history.length > a.history.length ? b : a));
    expect(big.history.length).toBeGreaterThan(100);
    for (const limit of [1, 3, 20, 64, 100, undefined]) {
      const pages: any[] = [];
      let cursor: string | null = null;
      do {
        const r: Resp<any> = await get(sim, `${API}/inventory-status/${big.item.id}/history`, { limit, cursor });
        expect(r.status).toBe(200);
        expect(HistoryResponse.safeParse(r.body).success).toBe(true);
        pages.push(r.body);
        cursor = r.body.page.nextCursor;
      } while (cursor && pages.length <= big.history.length); // bounded: a broken keyset must fail, not loop
      expect(pages.flatMap((p) => p.items)).toEqual(big.history);
      const size = limit ?? 20;
      expect(pages.length).toBe(Math.ceil(big.history.length / size));
    }
  });

  it("scoped walks return exactly the rows at leaves of the scope", async () => {
    const sample = gt.skus.filter((s) => s.history.length > 5).slice(0, 12);
    for (const scope of locs.map((l) => l.id)) {
      const leaves = leavesIn(locs, scope);
      for (const s of sample) {
        const rows = await walkHistory(sim, s.item.id, scope, 7);
        expect(rows).toEqual((s.history as any[]).filter((r) => leaves.has(r.locationId)));
      }
    }
  });

  it("rows sharing an occurredAt keep a stable order across page boundaries", async () => {
    // find a SKU whose history has a tie, and cut pages right inside it with limit 1
    const withTie = gt.skus.find((s) => (s.history as any[]).some((r, i, a) => i > 0 && a[i - 1].occurredAt === r.occurredAt))!;
    expect(withTie).toBeDefined();
    expect(await walkHistory(sim, withTie.item.id, null, 1)).toEqual(withTie.history);
  });

  it("a SKU without history has an empty page and no cursor", async () => {
    const empty = gt.skus.find((s) => s.history.length === 0)!;
    const r = await get(sim, `${API}/inventory-status/${empty.item.id}/history`);
    expect(r.body).toEqual({ items: [], page: { nextCursor: null } });
    const d = await get(sim, `${API}/inventory-status/${empty.item.id}`);
    expect(d.body.locations).toEqual([]);
    expect(d.body.totalQuantity).toBe(0);
  });
});

describe("replay of served rows", () => {
  it("reproduces every detail quantity (minus unreflected rows), SET deltas, transfers within one root", async () => {
    const served: GroundTruth = {
      workspace: (await get(sim, `${API}/workspace`)).body,
      locations: (await get(sim, `${API}/locations`)).body.locations,
      skus: [],
    };
    const items = new Map<string, any>();
    let cursor: string | null = null;
    let pages = 0;
    do {
      pages++;
      const r: Resp<any> = await get(sim, `${API}/inventory-status`, { limit: 100, cursor });
      for (const i of r.body.items) items.set(i.id, i);
      cursor = r.body.page.nextCursor;
    } while (cursor && pages < 100);
    for (const s of gt.skus) {
      const detail = (await get(sim, `${API}/inventory-status/${s.item.id}`)).body;
      const history = await walkHistory(sim, s.item.id, null, 100);
      served.skus.push({ item: items.get(s.item.id), detail, history, unreflected: s.unreflected });
    }
    expect(checkInvariants(served)).toEqual([]);
    // the test has teeth: a wrong unreflected count or a corrupted SET row is caught
    const lagging = served.skus.find((s) => Object.values(s.unreflected).some((n) => n > 0))!;
    const leaf = Object.keys(lagging.unreflected).find((k) => lagging.unreflected[k]! > 0)!;
    const rows = (lagging.history as any[]).filter((r) => r.locationId === leaf);
    const changesQty = rows.slice(0, lagging.unreflected[leaf]).some((r) => (r.kind === "set" ? r.quantity !== 0 : true));
    if (changesQty) expect(checkInvariants({ ...served, skus: [{ ...lagging, unreflected: { ...lagging.unreflected, [leaf]: 0 } }] })).not.toEqual([]);
    const withSet = served.skus.find((s) => (s.history as any[]).some((r) => r.kind === "set"))!;
    const corrupted = structuredClone(withSet);
    const setRow = (corrupted.history as any[]).find((r) => r.kind === "set");
    setRow.quantity += 1;
    expect(checkInvariants({ ...served, skus: [corrupted] }).some((p) => p.includes("SET quantity"))).toBe(true);
  });
});
