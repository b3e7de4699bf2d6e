import { describe, expect, it } from "vitest";
import { ConcurrencyLimit } from "../../src/scheduler/concurrency.js";

/** Round trips of `ms` each, answered now. */
function answered(limit: ConcurrencyLimit, ms: number, n: number): void {
  for (let i = 0; i < n; i++) limit.answer(1_000, 1_000 + ms);
}

describe("ConcurrencyLimit", () => {
  it("on loopback (2 ms) keeps the floor, unpaced however many passed, and at 200 req/s", () => {
    const limit = new ConcurrencyLimit(4, 32);
    answered(limit, 2, 10);
    for (let i = 0; i < 100; i++) limit.passed();
    expect(limit.limit(null)).toBe(4);
    expect(limit.limit(200)).toBe(4);
  });

  it("unpaced behind latency grows by one per request that passed, up to the sizing for 200 req/s", () => {
    const limit = new ConcurrencyLimit(4, 64);
    answered(limit, 100, 4);
    // 200 req/s × 0.1 s + 2 = 22 (no headroom before a rate of our own), reached only as requests pass.
    expect(limit.limit(null)).toBe(4);
    for (let i = 0; i < 4; i++) limit.passed();
    expect(limit.limit(null)).toBe(8);
    for (let i = 0; i < 8; i++) limit.passed();
    expect(limit.limit(null)).toBe(16);
    for (let i = 0; i < 100; i++) limit.passed();
    expect(limit.limit(null)).toBe(22);
  });

  it("at a rate of our own follows rate × latency × 1.5 + 2, capped by the ceiling", () => {
    const limit = new ConcurrencyLimit(4, 32);
    answered(limit, 100, 8);
    expect(limit.limit(100)).toBe(17);
    expect(limit.limit(200)).toBe(32);
    // 200 req/s 100 ms away wants 32: a ceiling of 16 holds it there (160 req/s at most).
    const capped = new ConcurrencyLimit(4, 16);
    answered(capped, 100, 8);
    expect(capped.limit(200)).toBe(16);
    expect(capped.limit(100)).toBe(16);
  });
});
