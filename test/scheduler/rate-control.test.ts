/**
 * RateControl alone, driven by hand (no clock, no HTTP): what it decides from the sends and
 * answers it is told of.
 */
import { describe, expect, it } from "vitest";
import { RateControl } from "../../src/scheduler/rate-control.js";

/** `passes` requests sent at `t` that passed (the first the first after a pause, if `afterPause`), then one sent 5 ms later answered 429. */
function passesThen429(c: RateControl, t: number, passes: number, opts: { afterPause?: boolean; waitMs?: number | null } = {}): void {
  for (let i = 0; i < passes; i++) {
    c.sent(t, i === 0 && opts.afterPause === true);
    c.passed(t);
  }
  c.sent(t + 5, false);
  c.throttled(t + 5, t + 6, passes, opts.waitMs ?? null);
}

describe("rate control", () => {
  it("a ramp that grows past 50 req/s gives the pacer its carry (late timers would hold it below the rate it set)", () => {
    const c = new RateControl();
    let t = 1_000_000;
    // The run's first segment: a burst of 20 that passed, then a 429.
    passesThen429(c, t, 20);
    expect(c.current).toMatchObject({ phase: "ramp", rate: 20, carry: 0 });
    // Sending at the ramp's rate every step, no 429: it grows ×1.5 per step.
    t += 1_100;
    c.sent(t, true);
    while ((c.current.rate ?? 0) < 50) {
      const rate = c.current.rate!;
      for (let i = 0; i < Math.ceil(rate / 4); i++) {
        t += 250 / Math.ceil(rate / 4);
        c.sent(t, false);
        c.passed(t);
      }
      c.tick(t);
    }
    expect(c.current.phase).toBe("ramp");
    expect(c.current.rate).toBeGreaterThanOrEqual(50);
    expect(c.current.carry).toBeGreaterThan(0);
  });

  it("far from the server, a first segment that passed nothing does not slow the ramp's steps (its rate is not 0)", () => {
    // 100 ms away: each step is a rate × 0.1 s in flight, so the ramp steps by 1.25 only at or above the first segment's rate.
    const c = new RateControl({ latencyMs: 100, spreadMs: 5, shortestMs: 100, ceiling: 32 });
    let t = 1_000_000;
    // The run's first request is a 503, the next, 150 ms on, a 429: the bucket was empty, nothing passed.
    c.sent(t, false);
    c.spent(t);
    c.sent(t + 150, false);
    c.throttled(t + 150, t + 250, 0, 1_000);
    expect(c.current.phase).toBe("unpaced");
    // After the pause, the segment that counts as the first: 30 passed at once, then a 429 (too short to give a rate).
    t += 1_300;
    passesThen429(c, t, 30, { afterPause: true, waitMs: 1_000 });
    expect(c.current).toMatchObject({ phase: "ramp", rate: 30 });
    // A step later, sent at its rate without a 429: the ramp doubles (it stepped by 1.25 when that segment read as 0 req/s).
    t += 1_100;
    c.sent(t, true);
    for (let i = 0; i < 11; i++) {
      t += 35;
      c.sent(t, false);
      c.passed(t);
    }
    c.tick(t);
    expect(c.current).toMatchObject({ phase: "ramp", rate: 60 });
  });

  it("once a window, a 429 naming an end under 2 s away is still a window's end, not a bucket's token (no ramp from scratch)", () => {
    const c = new RateControl();
    let t = 1_000_000;
    // The first window: 300 passed, then a 429 naming its end 7 s away.
    passesThen429(c, t, 300, { waitMs: 7_000 });
    expect(c.current.phase).toBe("window");
    // The next window opens; its allowance goes out, and a 429 names an end 400 ms away.
    t += 7_100;
    passesThen429(c, t, 300, { afterPause: true, waitMs: 400 });
    expect(c.current).toMatchObject({ phase: "window", rate: null });
  });
});
