import { describe, expect, it } from "vitest";
import { SecondWindow } from "../../src/scheduler/second-window.js";

/** `n` passes sent `gapMs` apart from `at` (ms); returns the time after the last. */
function passes(w: SecondWindow, at: number, n: number, gapMs: number): number {
  for (let i = 0; i < n; i++) w.passed(at + i * gapMs);
  return at + n * gapMs;
}

describe("SecondWindow (is the quota N per second?)", () => {
  it("fits a counter per second: two refused seconds of 100 each, one sent in 100 ms and one in 400 ms", () => {
    const w = new SecondWindow();
    // Windows start at 0, 1000, 2000...: 100 pass in 100 ms, the 101st is refused; after the pause, 100 more over 400 ms.
    w.refused(passes(w, 10, 100, 1), 1000);
    w.refused(passes(w, 1_100, 100, 4), 1000);
    expect(w.allowance()).toBe(100);
  });

  it("fits one whose first burst crossed a second's start (44 before it, 100 after)", () => {
    const w = new SecondWindow();
    const end = passes(w, 856, 144, 1);
    w.refused(end, 1000);
    w.refused(passes(w, 2_050, 100, 3), 1000);
    expect(w.allowance()).toBe(100);
  });

  it("does not fit a bucket probed just above its rate (every second passes about what it refuses at, over the same span)", () => {
    const w = new SecondWindow();
    // 41 req/s sent evenly, refused every 2.5 s: each refused second passed 41 over a whole second.
    let t = 0;
    for (let k = 0; k < 4; k++) {
      t = passes(w, t, 102, 1000 / 41);
      w.refused(t, 1000);
      t += 1050;
    }
    expect(w.allowance()).toBeNull();
  });

  it("needs two refused seconds, and no refusal that found fewer than N passed in its second", () => {
    const w = new SecondWindow();
    w.refused(passes(w, 10, 100, 1), 1000);
    expect(w.allowance()).toBeNull();
    // A refusal after 30 passes in a second: a count of 100 per second would have let it through.
    w.refused(passes(w, 1_100, 30, 1), 1000);
    w.refused(passes(w, 3_100, 100, 4), 1000);
    expect(w.allowance()).toBeNull();
  });

  it("is ruled out by a wait of more than a second, or by none", () => {
    for (const wait of [2000, null]) {
      const w = new SecondWindow();
      w.refused(passes(w, 10, 100, 1), 1000);
      w.refused(passes(w, 1_100, 100, 4), wait);
      expect(w.allowance(), String(wait)).toBeNull();
    }
  });

  it("is ruled out for good once a hold under N is refused", () => {
    const w = new SecondWindow();
    w.refused(passes(w, 10, 100, 1), 1000);
    w.refused(passes(w, 1_100, 100, 4), 1000);
    w.ruleOut();
    w.refused(passes(w, 3_100, 100, 4), 1000);
    expect(w.allowance()).toBeNull();
  });
});
