/**
 * pageOverlap (src/sync/walker.ts): how many rows a history page begins with that the page before
 * ended with. A server paging by offset repeats them when a write lands at the top mid-walk; rows
 * identical in every field split by a page boundary look the same, which is why fetchSku walks
 * again and goes on when the overlap comes back where it was (test/e2e/live-writes.test.ts).
 */
import { describe, expect, it } from "vitest";
import type { HistoryRow } from "../../src/core/api-schemas.js";
import { pageOverlap } from "../../src/sync/walker.js";

const row = (n: number, at = `2026-01-01T00:00:${String(60 - n).padStart(2, "0")}.000Z`): HistoryRow =>
  ({
    kind: "movement",
    occurredAt: at,
    direction: "in",
    quantity: n,
    locationId: "11111111-1111-4111-8111-111111111111",
    locationName: null,
    locationCode: null,
    eventId: null,
    eventTypeCode: null,
    eventTypeName: null,
    setSessionId: null,
    setTypeCode: null,
    observedQuantity: null,
    note: null,
  }) as HistoryRow;

describe("pageOverlap", () => {
  const page1 = [row(1), row(2), row(3), row(4)];

  it("0 for pages that follow each other, an empty page, or no page before", () => {
    expect(pageOverlap(page1, [row(5), row(6)])).toBe(0);
    expect(pageOverlap(page1, [])).toBe(0);
    expect(pageOverlap([], [row(1)])).toBe(0);
  });

  it("the number of rows repeated: one write ahead repeats the last row, three writes the last three", () => {
    expect(pageOverlap(page1, [row(4), row(5), row(6)])).toBe(1);
    expect(pageOverlap(page1, [row(2), row(3), row(4), row(5)])).toBe(3);
    expect(pageOverlap(page1, [row(1), row(2), row(3), row(4)])).toBe(4);
  });

  it("a row equal to an earlier one but not continuing to the page's end is no overlap", () => {
    expect(pageOverlap(page1, [row(3), row(5)])).toBe(0);
    expect(pageOverlap(page1, [row(2), row(3)])).toBe(0);
  });

  it("rows differing in one field only are different rows", () => {
    const other = { ...row(4), note: "x" } as HistoryRow;
    expect(pageOverlap(page1, [other, row(5)])).toBe(0);
  });

  it("ties: rows sharing one occurredAt are told apart by their other fields", () => {
    const at = "2026-01-01T00:00:00.000Z";
    const ties = [row(1, at), row(2, at), row(3, at)];
    expect(pageOverlap(ties, [row(4, at), row(5, at)])).toBe(0);
    expect(pageOverlap(ties, [row(3, at), row(4, at)])).toBe(1);
  });
});
