import { describe, expect, it } from "vitest";
import { ceilingHint } from "../../src/sync/ceiling-hint.js";

describe("ceilingHint", () => {
  it("names the ceiling, the time it was full, the round trip and the most it allows (ceiling ÷ round trip)", () => {
    expect(ceilingHint({ ceiling: 32, heldMs: 11_000, sendingMs: 14_500, roundTripMs: 205, unpaced: null })).toBe(
      "the in-flight ceiling (concurrency 32) was full for 11.0 s of 14.5 s of sending: at a median round trip of 205 ms, 32 in flight send at most about 156 req/s; if the server's quota allows more, raise --concurrency (config: concurrency, up to 64)",
    );
  });

  it("says nothing for under a second held, or under a quarter of the sending time", () => {
    expect(ceilingHint({ ceiling: 4, heldMs: 999, sendingMs: 1_500, roundTripMs: 100, unpaced: null })).toBeNull();
    expect(ceilingHint({ ceiling: 4, heldMs: 2_400, sendingMs: 10_000, roundTripMs: 100, unpaced: null })).toBeNull();
    expect(ceilingHint({ ceiling: 4, heldMs: 2_500, sendingMs: 10_000, roundTripMs: 100, unpaced: null })).not.toBeNull();
  });

  it("with no 429 in the run and the in-flight count sized before any quota is known all taken, it says so and names --max-rps", () => {
    const unpaced = { heldMs: 6_000, limit: 12, sizedForRps: 200 };
    expect(ceilingHint({ ceiling: 32, heldMs: 0, sendingMs: 8_000, roundTripMs: 50, unpaced })).toBe(
      "no request was refused, and the 12 requests in flight sized for a quota of 200 req/s (none named, none met) were all taken for 6.0 s of 8.0 s of sending: at a median round trip of 50 ms, about 240 req/s; if the server's quota allows more, --max-rps N (config: rateLimit.requestsPerSecond) sizes them for N",
    );
    // The same thresholds: under a second, or under a quarter of the sending time, says nothing.
    expect(ceilingHint({ ceiling: 32, heldMs: 0, sendingMs: 8_000, roundTripMs: 50, unpaced: { ...unpaced, heldMs: 1_999 } })).toBeNull();
    expect(ceilingHint({ ceiling: 32, heldMs: 0, sendingMs: 1_500, roundTripMs: 50, unpaced: { ...unpaced, heldMs: 999 } })).toBeNull();
    // A full ceiling is the first thing to say.
    expect(ceilingHint({ ceiling: 32, heldMs: 5_000, sendingMs: 8_000, roundTripMs: 50, unpaced })).toMatch(/^the in-flight ceiling/);
  });

  it("at the most `concurrency` allows, it does not advise raising it", () => {
    const hint = ceilingHint({ ceiling: 64, heldMs: 5_000, sendingMs: 6_000, roundTripMs: 400, unpaced: null });
    expect(hint).toMatch(/64 in flight send at most about 160 req\/s; 64 is the most concurrency allows$/);
    expect(hint).not.toMatch(/raise/);
  });
});
