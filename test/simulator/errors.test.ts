/**
 * Authentication, parameter validation, routing errors and cursor binding.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorBody } from "../../src/core/api-schemas.js";
import { startSimulator, type RunningSimulator } from "../../src/simulator/index.js";
import { API, get } from "./helpers.js";

let sim: RunningSimulator;
let skuId: string;
let otherSku: string;
let leafId: string;
let rootId: string;

beforeAll(async () => {
  sim = await startSimulator({ seed: 5, skus: 80 });
  const gt = sim.groundTruth();
  const rich = gt.skus.filter((s) => s.history.length > 10);
  skuId = rich[0]!.item.id;
  otherSku = rich[1]!.item.id;
  leafId = (gt.locations as any[]).find((l) => l.isLeaf).id;
  rootId = (gt.locations as any[])[0].id;
});
afterAll(() => sim.close());

function expectError(r: { status: number; headers: Headers; body: any }, status: number, code: string): void {
  expect(r.status).toBe(status);
  expect(r.headers.get("content-type")).toMatch(/^application\/json/);
  expect(ErrorBody.safeParse(r.body).success).toBe(true);
  expect(r.body.error.code).toBe(code);
  expect(typeof r.body.error.message).toBe("string");
}

describe("authentication", () => {
  const paths = ["/workspace", "/locations", "/inventory-status", "/inventory-status/00000000-0000-4000-8000-000000000000"];

  it("401 without a key, with another key, with a non-Bearer scheme", async () => {
    for (const p of paths) {
      expectError(await get(sim, API + p, {}, { key: null }), 401, "unauthorized");
      expectError(await get(sim, API + p, {}, { key: "sim_0123456789abcdef0123456789abcdef" }), 401, "unauthorized");
      expectError(await get(sim, API + p, {}, { key: null, headers: { authorization: `Basic ${sim.apiKey}` } }), 401, "unauthorized");
      expectError(await get(sim, API + p, {}, { key: `${sim.apiKey}x` }), 401, "unauthorized");
    }
    expect((await get(sim, `${API}/workspace`)).status).toBe(200);
  });

  it("never accepts the key as a token query parameter", async () => {
    expectError(await get(sim, `${API}/workspace`, { token: sim.apiKey }, { key: null }), 401, "unauthorized");
    expectError(await get(sim, `${API}/workspace`, { access_token: sim.apiKey }, { key: null }), 401, "unauthorized");
  });

  it("accepts a lowercase scheme name (auth schemes are case-insensitive)", async () => {
    expect((await get(sim, `${API}/workspace`, {}, { key: null, headers: { authorization: `bearer ${sim.apiKey}` } })).status).toBe(200);
  });

  it("401 bodies never echo the key", async () => {
    const r = await get(sim, `${API}/workspace`, {}, { key: "secret-key-that-must-not-appear" });
    expect(r.text).not.toContain("secret-key-that-must-not-appear");
  });

  it("admin endpoints need the key too", async () => {
    expectError(await get(sim, "/_sim/stats", {}, { key: null }), 401, "unauthorized");
  });
});

describe("routing", () => {
  it("404 for unknown paths, 405 for other methods", async () => {
    for (const p of ["/nope", "/v1/external", "/v1/external/", "/v1/external/workspace/extra", "/v2/external/workspace", `/v1/external/inventory-status/${skuId}/history/x`]) {
      expectError(await get(sim, p), 404, "not_found");
    }
    for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
      const r = await get(sim, `${API}/workspace`, {}, { method });
      expectError(r, 405, "method_not_allowed");
      expect(r.headers.get("allow")).toBe("GET");
    }
  });
});

describe("parameters", () => {
  it("non-UUID ids → 400 invalid_parameter; unknown ids → 404 not_found", async () => {
    expectError(await get(sim, `${API}/inventory-status/not-a-uuid`), 400, "invalid_parameter");
    expectError(await get(sim, `${API}/inventory-status/not-a-uuid/history`), 400, "invalid_parameter");
    expectError(await get(sim, `${API}/inventory-status/00000000-0000-4000-8000-000000000000`), 404, "not_found");
    expectError(await get(sim, `${API}/inventory-status/00000000-0000-4000-8000-000000000000/history`), 404, "not_found");
    for (const path of ["/inventory-status", `/inventory-status/${skuId}`, `/inventory-status/${skuId}/history`]) {
      expectError(await get(sim, API + path, { scopeLocationId: "root-a" }), 400, "invalid_parameter");
      expectError(await get(sim, API + path, { scopeLocationId: "" }), 400, "invalid_parameter");
      expectError(await get(sim, API + path, { scopeLocationId: "00000000-0000-4000-8000-000000000000" }), 404, "not_found");
      expect((await get(sim, API + path, { scopeLocationId: rootId })).status).toBe(200);
    }
  });

  it("stockState outside all / in_stock / empty → 400", async () => {
    for (const s of ["ALL", "instock", "", "none"]) expectError(await get(sim, `${API}/inventory-status`, { stockState: s }), 400, "invalid_parameter");
  });

  it("limit must be an integer 1..100 on list and history", async () => {
    for (const path of ["/inventory-status", `/inventory-status/${skuId}/history`]) {
      for (const bad of ["0", "101", "-1", "1.5", "abc", "", "1e2", " 5"]) expectError(await get(sim, API + path, { limit: bad }), 400, "invalid_parameter");
      expect((await get(sim, API + path, { limit: 1 })).body.items).toHaveLength(1);
      expect((await get(sim, API + path, { limit: 100 })).status).toBe(200);
    }
    expect((await get(sim, `${API}/inventory-status`)).body.items).toHaveLength(50);
    expect((await get(sim, `${API}/inventory-status/${skuId}/history`)).body.items.length).toBe(Math.min(20, sim.groundTruth().skus.find((s) => s.item.id === skuId)!.history.length));
  });
});

describe("cursors", () => {
  async function listCursor(params: Record<string, string>): Promise<string> {
    const r = await get(sim, `${API}/inventory-status`, { ...params, limit: 2 });
    expect(r.body.page.nextCursor).toEqual(expect.any(String));
    return r.body.page.nextCursor;
  }

  it("a list cursor is bound to q, stockState and scope, but not to limit", async () => {
    const c = await listCursor({ q: "e", stockState: "all", scopeLocationId: rootId });
    const same = { q: "e", stockState: "all", scopeLocationId: rootId };
    expect((await get(sim, `${API}/inventory-status`, { ...same, cursor: c, limit: 9 })).status).toBe(200);
    // explicit default == omitted default, and q case does not matter (matching is case-insensitive)
    expect((await get(sim, `${API}/inventory-status`, { q: "E", scopeLocationId: rootId, cursor: c })).status).toBe(200);
    expectError(await get(sim, `${API}/inventory-status`, { ...same, q: "a", cursor: c }), 400, "invalid_cursor");
    expectError(await get(sim, `${API}/inventory-status`, { ...same, q: undefined as unknown as string, cursor: c }), 400, "invalid_cursor");
    expectError(await get(sim, `${API}/inventory-status`, { ...same, stockState: "in_stock", cursor: c }), 400, "invalid_cursor");
    expectError(await get(sim, `${API}/inventory-status`, { ...same, scopeLocationId: leafId, cursor: c }), 400, "invalid_cursor");
    expectError(await get(sim, `${API}/inventory-status`, { q: "e", cursor: c }), 400, "invalid_cursor");
  });

  it("a history cursor is bound to its SKU and scope", async () => {
    const r = await get(sim, `${API}/inventory-status/${skuId}/history`, { limit: 2 });
    const c = r.body.page.nextCursor;
    expect((await get(sim, `${API}/inventory-status/${skuId}/history`, { cursor: c, limit: 50 })).status).toBe(200);
    expectError(await get(sim, `${API}/inventory-status/${otherSku}/history`, { cursor: c }), 400, "invalid_cursor");
    expectError(await get(sim, `${API}/inventory-status/${skuId}/history`, { cursor: c, scopeLocationId: rootId }), 400, "invalid_cursor");
    // and list and history cursors are not interchangeable
    expectError(await get(sim, `${API}/inventory-status`, { cursor: c }), 400, "invalid_cursor");
    const lc = await listCursor({});
    expectError(await get(sim, `${API}/inventory-status/${skuId}/history`, { cursor: lc }), 400, "invalid_cursor");
  });

  it("forged or garbled cursors → 400 invalid_cursor", async () => {
    const c = await listCursor({});
    const [body, tag] = c.split(".");
    const payload = JSON.parse(Buffer.from(body!, "base64url").toString());
    payload.k.id = "00000000-0000-4000-8000-000000000000";
    const forged = `${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${tag}`;
    const flipped = `${body}.${tag!.startsWith("A") ? "B" : "A"}${tag!.slice(1)}`;
    for (const bad of [forged, flipped, "garbage", c.slice(0, -3), `${c}x`, Buffer.from('{"k":{"id":""}}').toString("base64url"), "a.b.c", "x".repeat(5000)]) {
      expectError(await get(sim, `${API}/inventory-status`, { cursor: bad }), 400, "invalid_cursor");
    }
    // the unmodified cursor is fine
    expect((await get(sim, `${API}/inventory-status`, { cursor: c })).status).toBe(200);
  });

  it("cursors are opaque: no ids or filters in clear text", async () => {
    const c = await listCursor({ q: "shirt" });
    expect(c).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(c).not.toContain("shirt");
  });
});
