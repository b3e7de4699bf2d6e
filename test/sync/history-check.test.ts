/** unexplainedLeaves: does a history, newest first in the server's order, add up to the detail's quantities? */
import { describe, expect, it } from "vitest";
import { unexplainedLeaves, type ReplayableRow } from "../../src/sync/history-check.js";

const A = "11111111-1111-4111-8111-111111111111";
const B = "22222222-2222-4222-8222-222222222222";
const row = (locationId: string, occurredAt: string, kind: "movement" | "set", quantity: number, direction: string | null, observedQuantity: number | null = null): ReplayableRow => ({
  locationId,
  occurredAt,
  kind,
  quantity,
  direction,
  observedQuantity,
});
const detail = (...locs: Array<[string, number, string?]>) => ({
  locations: locs.map(([id, quantity, status]) => ({ id, name: null, code: null, parentId: null, quantity, freshness: { status: status ?? "clean", lastReplayedAt: null, lastSourceKind: null } })),
});

describe("unexplainedLeaves", () => {
  it("with no SET, the signed deltas sum to the quantity", () => {
    const rows = [row(A, "2026-01-03T00:00:00Z", "movement", 2, "out"), row(A, "2026-01-01T00:00:00Z", "movement", 10, "in")];
    expect(unexplainedLeaves(rows, detail([A, 8]))).toEqual([]);
    expect(unexplainedLeaves(rows, detail([A, 12]))).toEqual([A]);
  });

  it("the newest SET's observed count plus the rows above it; rows below it do not matter", () => {
    const rows = [row(A, "2026-01-05T00:00:00Z", "movement", 3, "in"), row(A, "2026-01-04T00:00:00Z", "set", -4, null, 20), row(A, "2026-01-01T00:00:00Z", "movement", 999, "in")];
    expect(unexplainedLeaves(rows, detail([A, 23]))).toEqual([]);
    expect(unexplainedLeaves(rows, detail([A, 20]))).toEqual([A]);
  });

  it("rows sharing the SET's instant count by the server's order, not by time", () => {
    const t = "2026-01-04T00:00:00Z";
    const aboveSet = [row(A, t, "movement", 5, "in"), row(A, t, "set", 0, null, 20), row(A, t, "movement", 7, "in")];
    expect(unexplainedLeaves(aboveSet, detail([A, 25]))).toEqual([]);
    expect(unexplainedLeaves(aboveSet, detail([A, 32]))).toEqual([A]);
  });

  it("a leaf whose freshness is not clean proves nothing and is skipped; a clean leaf without rows must be 0", () => {
    expect(unexplainedLeaves([row(A, "2026-01-01T00:00:00Z", "movement", 1, "in")], detail([A, 5, "dirty"]))).toEqual([]);
    expect(unexplainedLeaves([], detail([B, 0]))).toEqual([]);
    expect(unexplainedLeaves([], detail([B, 3]))).toEqual([B]);
  });
});
