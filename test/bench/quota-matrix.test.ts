/**
 * The quota matrix's arithmetic (src/bench/quota-matrix.ts): the least time a quota allows,
 * the simulate flags each cell starts its simulator with, and the cells' coverage of the
 * shapes issue 10 names. The matrix itself runs in `npm run bench -- quota`.
 */
import { describe, expect, it } from "vitest";
import { type CellResult, cellLeastMs, knownRateOf, leastMs, matrixTable, medianOf, QUOTA_CELLS, quotaFlags, steadyShare } from "../../src/bench/quota-matrix.js";

describe("leastMs", () => {
  it("token bucket: (accepted − burst) ÷ rate, never negative", () => {
    expect(leastMs({ requestsPerSecond: 40, burst: 10 }, 1230, 0)).toBe(30_500);
    expect(leastMs({ requestsPerSecond: 5, burst: 1 }, 126, 999)).toBe(25_000);
    expect(leastMs({ requestsPerSecond: 100 }, 50, 0)).toBe(0); // default burst = rate
  });
  it("token bucket part empty at the first request: (accepted − what it held) ÷ rate", () => {
    expect(leastMs({ requestsPerSecond: 40, burst: 10, startTokens: 0 }, 1230, 0)).toBe(30_750);
    expect(leastMs({ requestsPerSecond: 40, burst: 10, startTokens: 2 }, 1230, 0)).toBe(30_700);
  });
  it("fixed window: (windows needed − 1) × window, less how far into its window the first request came", () => {
    const q = { kind: "fixed-window", requests: 300, windowSeconds: 10 } as const;
    expect(leastMs(q, 300, 0)).toBe(0);
    expect(leastMs(q, 301, 0)).toBe(10_000);
    expect(leastMs(q, 1028, 0)).toBe(30_000);
    expect(leastMs(q, 1028, 300)).toBe(29_700);
    expect(leastMs(q, 1028, 10_300)).toBe(29_700); // the offset counts within a window
  });
  it("sliding window: (windows needed − 1) × window from the first request, whatever its offset", () => {
    const q = { kind: "sliding-window", requests: 250, windowSeconds: 5 } as const;
    expect(leastMs(q, 250, 0)).toBe(0);
    expect(leastMs(q, 1240, 0)).toBe(20_000);
    expect(leastMs(q, 1240, 300)).toBe(20_000);
  });
});

describe("cellLeastMs", () => {
  it("behind a limit before authentication: the longer of the quota's least time and the limit's own for what it let through", () => {
    const window = { kind: "fixed-window", requests: 250, windowSeconds: 10 } as const;
    // 819 accepted need 4 windows (30 s); the 40/s limit let 832 through: (832 − 5) ÷ 40 = 20.7 s.
    expect(cellLeastMs({ quota: window, preAuth: { requestsPerSecond: 40, burst: 5 } }, 819, 832, 0)).toBe(30_000);
    // A limit of 20/s binds instead: (832 − 5) ÷ 20 = 41.35 s.
    expect(cellLeastMs({ quota: window, preAuth: { requestsPerSecond: 20, burst: 5 } }, 819, 832, 0)).toBe(41_350);
    expect(cellLeastMs({ quota: window }, 819, 832, 0)).toBe(30_000);
    // A limit of 4 in flight, each answered in 100 ms on average, behind a bucket that never binds: 1,000 × 100 ms ÷ 4.
    expect(cellLeastMs({ quota: { requestsPerSecond: 1000, burst: 1000 }, inFlight: { max: 4, servedMs: 100 } }, 1000, 1000, 0)).toBe(25_000);
  });
});

describe("steadyShare", () => {
  it("admitted over the run's middle half of whole seconds ÷ the bucket's rate over them", () => {
    // 8 whole seconds: the middle half is seconds 2..5 (4 seconds); 10 req/s allows 40 there.
    const perSecond = [30, 5, 9, 10, 10, 9, 10, 3];
    expect(steadyShare({ requestsPerSecond: 10, burst: 20 }, perSecond, 8_400)).toBe(0.95);
  });
  it("none for a fixed window, or a run too short to have a middle", () => {
    expect(steadyShare({ kind: "fixed-window", requests: 300, windowSeconds: 10 }, [300, 0, 0, 0], 4_000)).toBeNull();
    expect(steadyShare({ requestsPerSecond: 10, burst: 1 }, [10], 1_500)).toBeNull();
  });
});

describe("the cells", () => {
  it("start their simulator with the quota's own flags", () => {
    expect(quotaFlags({ requestsPerSecond: 30, burst: 5, retryAfter: "none" })).toEqual(["--quota-rps", "30", "--quota-burst", "5", "--quota-retry-after", "none"]);
    expect(quotaFlags({ kind: "fixed-window", requests: 300, windowSeconds: 10 })).toEqual(["--quota-window", "300/10"]);
    expect(quotaFlags({ kind: "sliding-window", requests: 250, windowSeconds: 5 })).toEqual(["--quota-sliding", "250/5"]);
    expect(quotaFlags({ requestsPerSecond: 40, burst: 10, startTokens: 0 })).toEqual(["--quota-rps", "40", "--quota-burst", "10", "--quota-start-tokens", "0"]);
  });
  it("cover the shapes of issue 10 §2, each name once", () => {
    const names = QUOTA_CELLS.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
    const buckets = QUOTA_CELLS.flatMap((c) => (c.quota.kind === "fixed-window" || c.quota.kind === "sliding-window" ? [] : [c.quota]));
    expect(buckets.some((q) => q.burst === 1)).toBe(true); // no burst
    expect(buckets.some((q) => q.startTokens === 0)).toBe(true); // emptied before the run
    expect(buckets.some((q) => q.burst === q.requestsPerSecond && q.requestsPerSecond >= 100)).toBe(true); // burst = rate
    expect(QUOTA_CELLS.some((c) => c.quota.kind === "fixed-window")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.quota.kind === "sliding-window")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.quota.retryAfter === "none" && (c.quota.kind ?? "token-bucket") === "token-bucket")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.quota.retryAfter === "none" && c.quota.kind === "fixed-window")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.quota.retryAfter === "date")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.quota.retryAfter === "date-floor")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.quota.retryAfter === "seconds-floor")).toBe(true); // "0" for every next token
    expect(QUOTA_CELLS.some((c) => c.args?.some((a) => a.startsWith("503:") && !a.includes("retry-after")))).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.args?.some((a) => a.startsWith("503:") && a.includes("retry-after")))).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.args?.includes("--latency-ms") && c.args[c.args.indexOf("--latency-ms") + 1] === "100")).toBe(true);
    expect(QUOTA_CELLS.some((c) => c.preAuth && c.quota.kind === "fixed-window")).toBe(true); // a window behind a limit before authentication
    expect(QUOTA_CELLS.some((c) => c.args?.some((a) => /^503:.*\bfor=\d+/.test(a)))).toBe(true); // 503 outages in time, not only counted bursts
    // A bucket of one token whose round trip is two token intervals or more: one request per round trip sends half
    // its rate at most (the shape we run far from, BENCHMARKS.md).
    const latencyOf = (c: (typeof QUOTA_CELLS)[number]) => {
      const i = c.args?.indexOf("--latency-ms") ?? -1;
      return i >= 0 ? Number(c.args![i + 1]) : 0;
    };
    expect(QUOTA_CELLS.some((c) => c.quota.kind !== "fixed-window" && c.quota.kind !== "sliding-window" && c.quota.burst === 1 && latencyOf(c) >= 2000 / c.quota.requestsPerSecond)).toBe(true);
    expect(Math.min(...buckets.map((q) => q.requestsPerSecond))).toBeLessThanOrEqual(2);
    expect(Math.max(...buckets.map((q) => q.requestsPerSecond))).toBeGreaterThanOrEqual(200);
  });
  it("median ignores cells without a ratio", () => {
    expect(medianOf([3, 1, Number.NaN, 2])).toBe(2);
    expect(medianOf([1, 2])).toBe(1.5);
  });
});

describe("the known-rate column (--known-rate)", () => {
  it("runs a token bucket at its rate, behind a limit before authentication at the slower of the two, and no window", () => {
    expect(knownRateOf({ quota: { requestsPerSecond: 40, burst: 10 } })).toBe(40);
    expect(knownRateOf({ quota: { requestsPerSecond: 60, burst: 10 }, preAuth: { requestsPerSecond: 25, burst: 5 } })).toBe(25);
    expect(knownRateOf({ quota: { kind: "fixed-window", requests: 300, windowSeconds: 10 } })).toBeNull();
    expect(knownRateOf({ quota: { kind: "sliding-window", requests: 250, windowSeconds: 5 } })).toBeNull();
    expect(knownRateOf({ quota: { requestsPerSecond: 1000, burst: 1000 }, inFlight: { max: 4, servedMs: 100 } })).toBeNull();
  });
  it("shows the known-rate ratio beside the cell's own, starred when that run drew a 429, and its median", () => {
    const cell = (name: string, ratio: number, known: CellResult["known"]): CellResult => ({
      name,
      about: "",
      skus: 1,
      requests: 10,
      accepted: 10,
      rateLimited: 0,
      share429: 0,
      responses503: 0,
      violations: 0,
      wallMs: 1000,
      processWallMs: 1200,
      leastMs: 900,
      ratio,
      steadyShare: null,
      equalToTruth: true,
      truthDifferences: [],
      syncStatus: "ok",
      known,
    });
    const table = matrixTable([
      cell("a", 1.2, { maxRps: 40, ratio: 1.03, share429: 0, violations: 0, equalToTruth: true }),
      cell("b", 1.5, { maxRps: 60, ratio: 1.3, share429: 0.01, violations: 0, equalToTruth: true }),
      cell("w", 1.1, null),
    ]);
    const rows = table.split("\n");
    expect(rows[0]).toMatch(/\bknown$/);
    expect(rows.find((r) => r.startsWith("a "))).toMatch(/1\.030$/);
    expect(rows.find((r) => r.startsWith("b "))).toMatch(/1\.300\*$/);
    expect(rows.find((r) => r.startsWith("w "))).toMatch(/ -$/);
    expect(table).toContain("median 1.165 over 2 token-bucket cells");
    expect(matrixTable([cell("a", 1.2, null)]).split("\n")[0]).not.toMatch(/known/);
  });
});
