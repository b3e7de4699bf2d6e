/**
 * The server's own stalls (src/simulator/stalls.ts): a request arriving in one is decided at its
 * end, every other at its arrival; the stalls come at seeded exponential gaps of the mean asked,
 * each at most as long as asked. Pure arithmetic on times handed in: no clock, no timer.
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/core/errors.js";
import { createRng } from "../../src/simulator/prng.js";
import { ServerStalls } from "../../src/simulator/stalls.js";

/** The stalls met by arrivals at every millisecond of [0, untilMs), as [start, end) from what decidedAt says. */
function stallsSeen(stalls: ServerStalls, untilMs: number): Array<{ start: number; end: number }> {
  const seen: Array<{ start: number; end: number }> = [];
  for (let t = 0; t < untilMs; t++) {
    const at = stalls.decidedAt(t);
    expect(at === t || at > t).toBe(true);
    if (at === t) continue;
    const last = seen.at(-1);
    if (last && last.end === at) continue;
    seen.push({ start: t, end: at });
  }
  return seen;
}

describe("ServerStalls", () => {
  it("holds what arrives in a stall to its end, at seeded exponential gaps of about the mean, none longer than asked", () => {
    const make = () => {
      const rng = createRng(7, "stall");
      return new ServerStalls({ everyMs: 200, ms: 30 }, () => rng.next(), 0);
    };
    const seen = stallsSeen(make(), 60_000);
    // 60 s at one stall per 200 ms on average (and up to 30 ms each): about 260-300.
    expect(seen.length).toBeGreaterThan(200);
    expect(seen.length).toBeLessThan(360);
    for (const s of seen) expect(s.end - s.start).toBeLessThanOrEqual(30);
    // Every arrival within a stall is decided at the same instant, its end; the next after it, at once.
    const again = make();
    const one = seen[3]!;
    for (let t = one.start; t < one.end; t++) expect(again.decidedAt(t)).toBe(one.end);
    expect(again.decidedAt(Math.ceil(one.end))).toBe(Math.ceil(one.end));
  });

  it("the same seed gives the same stalls; another seed, others", () => {
    const run = (seed: number) => {
      const rng = createRng(seed, "stall");
      return stallsSeen(new ServerStalls({ everyMs: 100, ms: 20 }, () => rng.next(), 0), 5_000);
    };
    expect(run(3)).toEqual(run(3));
    expect(run(4)).not.toEqual(run(3));
  });

  it("a mean gap of 0 or a negative length is a configuration error", () => {
    const r = () => 0.5;
    expect(() => new ServerStalls({ everyMs: 0, ms: 10 }, r, 0)).toThrow(ConfigError);
    expect(() => new ServerStalls({ everyMs: 100, ms: -1 }, r, 0)).toThrow(ConfigError);
  });
});
