import { describe, expect, it } from "vitest";
import { ceilingHint } from "../../src/sync/ceiling-hint.js";

describe("ceilingHint", () => {
  it("names the ceiling, the time it was full, the round trip and the most it allows (ceiling ÷ round trip)", () => {
    expect(ceilingHint({ ceiling: 32, heldMs: 11_000, sendingMs: 14_500, roundTripMs: 205 })).toBe(
      "the in-flight ceiling (concurrency 32) was full for 11.0 s of 14.5 s of sending: at a median round trip of 205 ms, 32 in flight send at most about 156 req/s; if the server's quota allows more, raise --concurrency (config: concurrency, up to 64)",
    );
  });

  it("says nothing for under a second held, or under a quarter of the sending time", () => {
    expect(ceilingHint({ ceiling: 4, heldMs: 999, sendingMs: 1_500, roundTripMs: 100 })).toBeNull();
    expect(ceilingHint({ ceiling: 4, heldMs: 2_400, sendingMs: 10_000, roundTripMs: 100 })).toBeNull();
    expect(ceilingHint({ ceiling: 4, heldMs: 2_500, sendingMs: 10_000, roundTripMs: 100 })).not.toBeNull();
  });

  it("at the most `concurrency` allows, it does not advise raising it", () => {
    const hint = ceilingHint({ ceiling: 64, heldMs: 5_000, sendingMs: 6_000, roundTripMs: 400 });
    expect(hint).toMatch(/64 in flight send at most about 160 req\/s; 64 is the most concurrency allows$/);
    expect(hint).not.toMatch(/raise/);
  });
});
