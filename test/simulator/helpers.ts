/**
 * Test helpers: HTTP through global fetch, full page walks, and an invariant checker that
 * re-derives everything from what the endpoints (or the ground truth) show. The checker
 * deliberately does not reuse the simulator's replay code: it is the independent witness.
 */
import type { GroundTruth, RunningSimulator } from "../../src/simulator/index.js";

export interface Resp<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function get<T = any>(
  sim: Pick<RunningSimulator, "baseUrl" | "apiKey">,
  path: string,
  params: Record<string, string | number | undefined | null> = {},
  init: RequestInit & { key?: string | null } = {},
): Promise<Resp<T>> {
  const url = new URL(sim.baseUrl + path);
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
  const key = init.key === undefined ? sim.apiKey : init.key;
  const headers = new Headers(init.headers);
  if (key !== null) headers.set("authorization", `Bearer ${key}`);
  headers.set("accept", "application/json");
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, body, text };
}

export const API = "/v1/external";

export interface ListWalk {
  items: any[];
  pages: any[];
  summary: any;
  locations: any[];
}

export async function walkList(sim: RunningSimulator, params: Record<string, string | number | undefined | null>, limit?: number): Promise<ListWalk> {
  const pages: any[] = [];
  let cursor: string | null = null;
  for (let guard = 0; guard < 100_000; guard++) {
    const r: Resp<any> = await get(sim, `${API}/inventory-status`, { ...params, limit, cursor });
    if (r.status !== 200) throw new Error(`list ${JSON.stringify(params)} → ${r.status} ${r.text}`);
    pages.push(r.body);
    cursor = r.body.page.nextCursor;
    if (cursor === null) break;
    if (guard > 0 && r.body.items.length === 0) throw new Error("list: empty page with a next cursor");
  }
  const ids = pages.flatMap((p) => p.items.map((i: any) => i.id));
  if (new Set(ids).size !== ids.length) throw new Error("list walk returned a SKU twice");
  return { items: pages.flatMap((p) => p.items), pages, summary: pages[0].summary, locations: pages[0].locations };
}

export async function walkHistory(sim: RunningSimulator, skuId: string, scopeLocationId?: string | null, limit?: number): Promise<any[]> {
  const rows: any[] = [];
  let cursor: string | null = null;
  let prevPage = "";
  for (let guard = 0; guard < 100_000; guard++) {
    const r: Resp<any> = await get(sim, `${API}/inventory-status/${skuId}/history`, { scopeLocationId, limit, cursor });
    if (r.status !== 200) throw new Error(`history ${skuId} → ${r.status} ${r.text}`);
    // A page identical to the previous one, or a cursor that comes back, means the keyset is off:
    // fail fast, don't loop. (One row equal to the previous page's last is legitimate: two lines
    // identical in every field split by the page boundary, the history-identical-rows profile;
    // callers compare the walk with ground truth, which catches a row served twice.)
    const page = JSON.stringify(r.body.items);
    if (page === prevPage && r.body.items.length) throw new Error(`history ${skuId}: a page was returned twice`);
    prevPage = page;
    rows.push(...r.body.items);
    if (r.body.page.nextCursor !== null && r.body.page.nextCursor === cursor) throw new Error(`history ${skuId}: the same cursor came back`);
    cursor = r.body.page.nextCursor;
    if (cursor === null) break;
  }
  return rows;
}

/** Active leaf ids under a location (or the whole workspace), from the /locations data alone. */
export function leavesIn(locations: any[], scopeId: string | null): Set<string> {
  return new Set(locations.filter((l) => l.isLeaf && l.status === "active" && (scopeId === null || l.pathIds.includes(scopeId))).map((l) => l.id));
}

export function rootOfLeaf(locations: any[]): Map<string, string> {
  return new Map(locations.filter((l) => l.isLeaf).map((l) => [l.id, l.pathIds[0]]));
}

/** Roots a scope reports on: all roots, or the one the scope is under. */
export function rootsIn(locations: any[], scopeId: string | null): string[] {
  if (scopeId === null) return locations.filter((l) => l.depth === 0).map((l) => l.id);
  return [locations.find((l) => l.id === scopeId).pathIds[0]];
}

/** Quantity of a SKU within a scope, from its (unscoped) detail. */
export function scopedQty(detail: any, leaves: Set<string>): number {
  return detail.locations.filter((l: any) => leaves.has(l.id)).reduce((s: number, l: any) => s + l.quantity, 0);
}

/**
 * Every invariant of the ground truth, derived independently. Returns human-readable
 * problems (empty = all good) so a failure says what broke.
 */
export function checkInvariants(gt: GroundTruth): string[] {
  const problems: string[] = [];
  const p = (msg: string): void => {
    if (problems.length < 50) problems.push(msg);
  };
  const locs = gt.locations as any[];
  const byId = new Map(locs.map((l) => [l.id, l]));
  const active = leavesIn(locs, null);
  const roots = rootsIn(locs, null);
  const rootOf = rootOfLeaf(locs);
  const ids = gt.skus.map((s) => s.item.id as string);
  for (let i = 1; i < ids.length; i++) if (!(ids[i - 1]! < ids[i]!)) p(`skus not strictly sorted at ${i}`);

  for (const s of gt.skus) {
    const id = s.item.id;
    const hist = s.history as any[];
    // order: occurredAt desc
    for (let i = 1; i < hist.length; i++) if (hist[i - 1].occurredAt < hist[i].occurredAt) p(`${id}: history not occurredAt desc at ${i}`);
    for (const r of hist) {
      if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(r.occurredAt)) p(`${id}: bad timestamp ${r.occurredAt}`);
      if (!active.has(r.locationId)) p(`${id}: row at non-active-leaf ${r.locationId}`);
      const loc = byId.get(r.locationId);
      if (loc && (loc.name !== r.locationName || loc.code !== r.locationCode)) p(`${id}: row location name/code mismatch`);
      if (r.kind === "movement") {
        if (!(r.quantity > 0) || !["in", "out"].includes(r.direction)) p(`${id}: movement quantity/direction ${r.quantity}/${r.direction}`);
        if (!r.eventId || !r.eventTypeCode || !r.eventTypeName) p(`${id}: movement without event fields`);
        if (r.setSessionId !== null || r.setTypeCode !== null || r.observedQuantity !== null) p(`${id}: movement with set fields`);
      } else if (r.kind === "set") {
        if (r.eventId !== null || r.eventTypeCode !== null || r.eventTypeName !== null) p(`${id}: set row with event fields`);
        if (!r.setSessionId || r.setTypeCode !== "regular" || !(r.observedQuantity >= 0)) p(`${id}: set row fields`);
        const dir = r.quantity > 0 ? "in" : r.quantity < 0 ? "out" : "none";
        if (r.direction !== dir) p(`${id}: set direction ${r.direction} for quantity ${r.quantity}`);
      } else p(`${id}: unknown kind ${r.kind}`);
    }
    // events: a transfer is exactly two rows (out + in, same root, same time and qty); other events one row
    const byEvent = new Map<string, any[]>();
    for (const r of hist) if (r.kind === "movement") byEvent.set(r.eventId, [...(byEvent.get(r.eventId) ?? []), r]);
    for (const [eid, rows] of byEvent) {
      const transfer = rows.some((r) => r.eventTypeCode.startsWith("transfer"));
      if (!transfer) {
        // One row, or lines identical in every field (history-identical-rows): copies of one line.
        if (rows.length !== 1 && !rows.every((r) => JSON.stringify(r) === JSON.stringify(rows[0]))) p(`${id}: event ${eid} has ${rows.length} rows`);
        continue;
      }
      const out = rows.find((r) => r.eventTypeCode === "transfer_out" && r.direction === "out");
      const inn = rows.find((r) => r.eventTypeCode === "transfer_in" && r.direction === "in");
      if (rows.length !== 2 || !out || !inn) p(`${id}: transfer ${eid} is not an out+in pair`);
      else {
        if (out.occurredAt !== inn.occurredAt || out.quantity !== inn.quantity) p(`${id}: transfer ${eid} halves differ`);
        if (out.locationId === inn.locationId) p(`${id}: transfer ${eid} within one leaf`);
        if (rootOf.get(out.locationId) !== rootOf.get(inn.locationId)) p(`${id}: transfer ${eid} crosses roots`);
      }
    }
    // replay per leaf, chronological = reverse of the endpoint order
    const perLeaf = new Map<string, any[]>();
    for (let i = hist.length - 1; i >= 0; i--) perLeaf.set(hist[i].locationId, [...(perLeaf.get(hist[i].locationId) ?? []), hist[i]]);
    const detailLocs = new Map((s.detail.locations as any[]).map((l) => [l.id, l]));
    if ([...perLeaf.keys()].sort().join() !== [...detailLocs.keys()].sort().join()) p(`${id}: detail leaves ≠ leaves with history`);
    if (Object.keys(s.unreflected).sort().join() !== [...perLeaf.keys()].sort().join()) p(`${id}: unreflected keys ≠ leaves with history`);
    for (const [leaf, rows] of perLeaf) {
      const unref = s.unreflected[leaf] ?? 0;
      const reflectedN = rows.length - unref;
      let bal = 0;
      let reflectedQty = 0;
      let last: any = null;
      rows.forEach((r, i) => {
        if (r.kind === "set") {
          if (r.quantity !== r.observedQuantity - bal) p(`${id}@${leaf}: SET quantity ${r.quantity} ≠ ${r.observedQuantity} − ${bal}`);
          bal = r.observedQuantity;
        } else bal += r.direction === "in" ? r.quantity : -r.quantity;
        if (bal < 0) p(`${id}@${leaf}: negative balance ${bal} at ${r.occurredAt}`);
        if (i === reflectedN - 1) {
          reflectedQty = bal;
          last = r;
        }
      });
      const d = detailLocs.get(leaf);
      if (!d) continue;
      if (d.quantity !== reflectedQty) p(`${id}@${leaf}: detail ${d.quantity} ≠ replay of reflected rows ${reflectedQty} (unreflected ${unref})`);
      if (d.freshness.status === "clean") {
        if (unref !== 0) p(`${id}@${leaf}: clean but ${unref} unreflected`);
        if (d.quantity !== bal) p(`${id}@${leaf}: clean but quantity ${d.quantity} ≠ full replay ${bal}`);
      } else if (!["dirty", "rebuilding", "failed"].includes(d.freshness.status)) p(`${id}@${leaf}: status ${d.freshness.status}`);
      const expectReplayed = last ? last.occurredAt : null;
      if (d.freshness.lastReplayedAt !== expectReplayed) p(`${id}@${leaf}: lastReplayedAt ${d.freshness.lastReplayedAt} ≠ ${expectReplayed}`);
      const expectKind = last ? (last.kind === "set" ? "set" : "event") : null;
      if (d.freshness.lastSourceKind !== expectKind) p(`${id}@${leaf}: lastSourceKind ${d.freshness.lastSourceKind} ≠ ${expectKind}`);
      const leafLoc = byId.get(leaf);
      if (d.name !== leafLoc.name || d.code !== leafLoc.code || d.parentId !== leafLoc.parentId) p(`${id}@${leaf}: detail location fields`);
    }
    // detail sorted by leaf id; totals
    const dl = (s.detail.locations as any[]).map((l) => l.id);
    if (dl.join() !== [...dl].sort().join()) p(`${id}: detail locations not sorted by id`);
    const total = (s.detail.locations as any[]).reduce((a, l) => a + l.quantity, 0);
    if (s.detail.totalQuantity !== total || s.detail.selectedQuantity !== total) p(`${id}: detail totals ${s.detail.totalQuantity}/${s.detail.selectedQuantity} ≠ ${total}`);
    if (s.item.totalQuantity !== total) p(`${id}: item total ${s.item.totalQuantity} ≠ ${total}`);
    const lq = s.item.locationQuantities as Record<string, number>;
    if (Object.keys(lq).sort().join() !== [...roots].sort().join()) p(`${id}: locationQuantities keys`);
    for (const r of roots) {
      const sum = (s.detail.locations as any[]).filter((l) => rootOf.get(l.id) === r).reduce((a, l) => a + l.quantity, 0);
      if (lq[r] !== sum) p(`${id}: locationQuantities[${r}] ${lq[r]} ≠ ${sum}`);
    }
    if (JSON.stringify(s.detail.sku) !== JSON.stringify(skuPart(s.item))) p(`${id}: detail.sku ≠ item's SKU fields`);
  }
  return problems;
}

function skuPart(item: any): any {
  const { totalQuantity: _t, locationQuantities: _l, ...sku } = item;
  return sku;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
