import { describe, expect, it } from "vitest";
import { ServerClock } from "../../src/scheduler/server-clock.js";

/** The Date header a server whose clock reads `serverMs` stamps. */
const dateAt = (serverMs: number): string => new Date(serverMs).toUTCString();
const T = Date.UTC(2026, 10, 29, 8, 0, 0, 0);

describe("ServerClock", () => {
  it("reads our own clock while no Date header was seen, or only unparsable ones", () => {
    const c = new ServerClock();
    expect(c.read(T)).toBe(T);
    c.observe(null, T, T + 5);
    c.observe("yesterday", T, T + 5);
    c.observe("2026-11-29T08:00:00Z", T, T + 5);
    expect(c.read(T + 10)).toBe(T + 10);
    expect(c.offsetMs).toBe(0);
  });

  it("reads our own clock, to the millisecond, while the server's Date headers agree with it at any point of the second", () => {
    const c = new ServerClock();
    for (const ms of [0, 1, 250, 500, 999, 1_000, 1_700, 2_999]) c.observe(dateAt(T + ms), T + ms - 3, T + ms + 2);
    expect(c.read(T + 3_123.5)).toBe(T + 3_123.5);
    expect(c.offsetMs).toBe(0);
  });

  it("a server 30 s behind: read on its clock, never later than it can read (a wait is never short), at most a second earlier", () => {
    const c = new ServerClock();
    const skew = -30_000;
    c.observe(dateAt(T + 400 + skew), T + 398, T + 402);
    const now = T + 1_000;
    const read = c.read(now);
    expect(read).toBeLessThanOrEqual(now + skew);
    expect(read).toBeGreaterThan(now + skew - 1_000);
    expect(c.offsetMs).toBeLessThan(-29_000);
  });

  it("a server 30 s ahead: read on its clock the same way", () => {
    const c = new ServerClock();
    const skew = 30_000;
    c.observe(dateAt(T + 400 + skew), T + 398, T + 402);
    const read = c.read(T + 1_000);
    expect(read).toBeLessThanOrEqual(T + 1_000 + skew);
    expect(read).toBeGreaterThan(T + 1_000 + skew - 1_000);
  });

  it("narrows the difference over answers: Date headers stamped across a second's turn pin it to the round trip", () => {
    const c = new ServerClock();
    const skew = -2_600;
    // Answers 10 ms apart, each stamped (cut to its second) by a server 2.6 s behind, 4 ms each way.
    for (let t = T; t < T + 2_000; t += 10) c.observe(dateAt(t + 4 + skew), t, t + 8);
    const read = c.read(T + 5_000);
    expect(read).toBeLessThanOrEqual(T + 5_000 + skew);
    expect(read).toBeGreaterThan(T + 5_000 + skew - 20);
  });

  it("a skew under CLOCKS_AGREE_MS is taken as clocks that agree", () => {
    const c = new ServerClock();
    for (let t = T; t < T + 2_000; t += 10) c.observe(dateAt(t + 4 - 60), t, t + 8);
    expect(c.offsetMs).toBe(0);
  });

  it("starts afresh when the bounds no longer meet (a clock was stepped)", () => {
    const c = new ServerClock();
    c.observe(dateAt(T - 30_000), T, T + 5);
    expect(c.offsetMs).toBeLessThan(-29_000);
    c.observe(dateAt(T + 10_000), T + 10_000, T + 10_005);
    expect(c.offsetMs).toBe(0);
  });
});

describe("ServerClock against a stale stamp", () => {
  it("one answer stamped a second early (a server's Date cache not yet renewed after its loop was held) is not taken for a clock behind", () => {
    const c = new ServerClock();
    for (let t = T; t < T + 900; t += 10) c.observe(dateAt(t + 4), t, t + 8);
    // Sent at T+1,005, stamped with the second before (its loop held 150 ms across the turn).
    c.observe(dateAt(T + 999), T + 1_150, T + 1_158);
    for (let t = T + 1_200; t < T + 1_800; t += 10) c.observe(dateAt(t + 4), t, t + 8);
    expect(c.offsetMs).toBe(0);
  });

  it("a clock 300 ms behind is found all the same: many answers say so, each near its second's turn", () => {
    const c = new ServerClock();
    for (let t = T; t < T + 3_000; t += 10) c.observe(dateAt(t + 4 - 300), t, t + 8);
    expect(c.offsetMs).toBeLessThanOrEqual(-300);
    expect(c.offsetMs).toBeGreaterThan(-320);
  });

  it("one answer alone is enough when it puts the clocks more than a second apart (a run whose first request is refused)", () => {
    const c = new ServerClock();
    c.observe(dateAt(T + 400 - 30_000), T + 398, T + 402);
    expect(c.offsetMs).toBeLessThan(-29_000);
  });
});
