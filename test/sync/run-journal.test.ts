import { describe, expect, it } from "vitest";
import { describeRate } from "../../src/sync/run-journal.js";

describe("the journal's rate line (describeRate)", () => {
  const rate = (requestsPerSecond: number | null, phase: "unpaced" | "ramp" | "probe" | "hold" | "contested" | "window", fitLow: number | null = null, fitHigh: number | null = null) =>
    ({ type: "rate", requestsPerSecond, phase, fitLow, fitHigh, inFlightLimit: 4 }) as const;

  it("a window's allowance sent at once, or paced within each window at the rate of the limit in front", () => {
    expect(describeRate(rate(null, "window"))).toBe("send unpaced (a fixed window: each window's allowance goes out at once as it opens), up to 4 in flight");
    expect(describeRate(rate(24.44, "window", 24, 25))).toBe(
      "send 24.4 req/s within each window (a fixed window behind a limit of about that rate: each window's allowance goes out at it), up to 4 in flight",
    );
  });

  it("a bucket's rate with the quota's bounds as fitted so far (? while unbounded above)", () => {
    expect(describeRate(rate(12, "ramp", 0, null))).toBe("send rate 12.0 req/s (ramp, quota between 0.0 and ? req/s), up to 4 in flight");
    expect(describeRate(rate(39.21, "hold", 39.21, 40.77))).toBe("send rate 39.2 req/s (hold, quota between 39.2 and 40.8 req/s), up to 4 in flight");
    expect(describeRate(rate(null, "unpaced"))).toBe("send rate unpaced (unpaced), up to 4 in flight");
  });

  it("a contested quota's rate says why it moves (another client, or a quota that moved) and how", () => {
    expect(describeRate(rate(18.24, "contested", 18.24, 20.27))).toBe(
      "send rate 18.2 req/s (contested: 429s at rates the quota had allowed, another client spends it or it moved; 5 % less at each 429, more after 3 s without one), up to 4 in flight",
    );
  });

  it("a limit on requests in flight found, and refuted by a 429 under it", () => {
    expect(describeRate({ ...rate(null, "hold", 25.8, 26.1), inFlightFound: true })).toBe(
      "send unpaced, up to 4 in flight (429s came only with 4 or more of ours in flight: a limit on requests in flight, not on rate)",
    );
    expect(describeRate({ ...rate(25.8, "hold", 25.8, 26.1), inFlightLimit: 6, inFlightRefuted: true })).toBe(
      "send rate 25.8 req/s (hold, quota between 25.8 and 26.1 req/s), up to 6 in flight; a 429 came under the limit on requests in flight taken: not such a limit, paced again",
    );
  });
});
