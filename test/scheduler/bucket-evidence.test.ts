/**
 * The evidence's joint replay (src/scheduler/bucket-evidence.ts) against a token bucket played
 * out here request by request: the rates it leaves must contain the bucket's, and narrow once a
 * cycle drains slowly; a server no token bucket explains fits none.
 */
import { describe, expect, it } from "vitest";
import { BucketEvidence } from "../../src/scheduler/bucket-evidence.js";

/** A token bucket (rate r/s, capacity b) that starts full (or with `start` tokens); requests arrive `transitMs` after they are sent. */
function bucket(r: number, b: number, transitMs = 1, start = b) {
  let tokens = start;
  let last = 0;
  return (sentAt: number): boolean => {
    const t = sentAt + transitMs;
    tokens = Math.min(b, tokens + ((t - last) * r) / 1000);
    last = t;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
}

/**
 * Play a run: an unpaced first segment (one request per ms), then after each 429 a pause of
 * `pauseMs` and sends at the next of `rates` until the next 429. Returns the evidence. The bucket
 * starts with `start` tokens (full by default).
 */
function play(r: number, b: number, rates: number[], pauseMs = 1_050, holdBefore: { rate: number; count: number } | null = null, start = b): BucketEvidence {
  const ev = new BucketEvidence();
  const admit = bucket(r, b, 1, start);
  const send = (t: number): boolean => {
    ev.sent(t);
    const ok = admit(t);
    ev.settled(t);
    if (ok) ev.passed(t);
    else ev.closeAt(t);
    return ok;
  };
  let t = 0;
  while (send(t)) t += 1;
  rates.forEach((rate, i) => {
    t += pauseMs;
    if (holdBefore && i === rates.length - 1) {
      // A long hold below the rate (no 429), then the last rate straight on.
      for (let k = 0; k < holdBefore.count; k++, t += 1000 / holdBefore.rate) send(t);
    }
    while (send(t)) t += 1000 / rate;
  });
  return ev;
}

const noise = (r: number) => 0.5 + (r * 3) / 1000;

describe("bucket evidence", () => {
  it("the rates that fit contain the bucket's after the ramp's 429, and narrow to within 6% after a probe that drains slowly", () => {
    const afterRamp = play(40, 10, [80]).bounds(0.5, 82, noise);
    expect(afterRamp).not.toBeNull();
    expect(afterRamp!.low).toBeLessThanOrEqual(40);
    expect(afterRamp!.high).toBeGreaterThanOrEqual(40);

    const afterProbe = play(40, 10, [80, 44]).bounds(0.5, 45, noise);
    expect(afterProbe).not.toBeNull();
    expect(afterProbe!.low).toBeLessThanOrEqual(40);
    expect(afterProbe!.high).toBeGreaterThanOrEqual(40);
    expect(afterProbe!.high / afterProbe!.low).toBeLessThan(1.06);
  });

  it("holds for fast and slow buckets, with and without burst", () => {
    for (const [r, b, rates] of [
      [200, 20, [400, 220]],
      [5, 1, [10, 6]],
      [150, 150, [300, 160]],
    ] as Array<[number, number, number[]]>) {
      const got = play(r, b, rates).bounds(0.5, rates.at(-1)! * 1.02, noise);
      expect(got, `${r}/${b}`).not.toBeNull();
      expect(got!.low, `${r}/${b}`).toBeLessThanOrEqual(r);
      expect(got!.high, `${r}/${b}`).toBeGreaterThanOrEqual(r);
    }
  });

  it("a cycle longer than the replay keeps (a hold of 10,000 requests) is cut, and the rates that fit still contain the bucket's", () => {
    const got = play(40, 10, [80, 44], 1_050, { rate: 39, count: 10_000 }).bounds(0.5, 45, noise);
    expect(got).not.toBeNull();
    expect(got!.low).toBeLessThanOrEqual(40);
    expect(got!.high).toBeGreaterThanOrEqual(40);
  });

  it("the least capacity the first segment shows at the bucket's rate is at most its capacity", () => {
    const ev = play(40, 10, [80]);
    expect(ev.capacityLow(40, 0.5)).toBeLessThanOrEqual(10);
    expect(ev.capacityLow(40, 0.5)).toBeGreaterThanOrEqual(8);
  });

  it("a first segment whose first requests went out slowly (a cold process) still shows most of the capacity at a fast rate: the bucket stayed full meanwhile", () => {
    // 40/s burst 10: four requests 40 ms apart (the workspace check, the first list page), then one per ms until a 429.
    // Counted without the cap, the 120 ms of the slow start refilled 12 tokens at 104 req/s, and the least capacity was 1.
    for (const start of [10, 5]) {
      const ev = new BucketEvidence();
      const admit = bucket(40, 10, 1, start);
      let t = 0;
      for (let i = 0; ; i++) {
        ev.sent(t);
        ev.settled(t);
        if (!admit(t)) {
          ev.closeAt(t);
          break;
        }
        ev.passed(t);
        t += i < 3 ? 40 : 1;
      }
      // Sound whatever the bucket held at the start: at its rate, at most its capacity...
      expect(ev.capacityLow(40, 0.5), `start ${start}`).toBeLessThanOrEqual(10);
      // ...and from a full bucket, most of it at 2.6x its rate (the ramp's step that drew the 429).
      if (start === 10) expect(ev.capacityLow(104, 0.5)).toBeGreaterThanOrEqual(7);
    }
  });

  it("a first segment sent slowly (its passes allow several times the capacity), the ramp's cycle, then a quiet probe: the replay with the probe's passes puts the rate's lower bound within 20% under the bucket's and the closed cycles bound the capacity under half those passes at 100/10, 60/5 and 200/20; at 40/10, where a bucket of 60 at 28 req/s explains the same passes, both stay sound only; never over the rate, never under the capacity", () => {
    for (const [r, b, bounded] of [
      [100, 10, true],
      [60, 5, true],
      [200, 20, true],
      // Slow enough that a bucket of 60 at 28 req/s explains the same passes: sound, not bounded.
      [40, 10, false],
    ] as const) {
      const ev = new BucketEvidence();
      const admit = bucket(r, b);
      let t = 0;
      /** Sends every `gapMs` from `t` until a 429 or `count` sends; the passes. */
      const send = (gapMs: number, count = Infinity): number => {
        let n = 0;
        for (let i = 0; i < count; i++, t += gapMs) {
          ev.sent(t);
          ev.settled(t);
          if (!admit(t)) {
            ev.closeAt(t);
            return n;
          }
          ev.passed(t);
          n++;
        }
        return n;
      };
      // The first segment at 1.18x the rate (a client slower than a burst would go), then after a pause the ramp's 1.32x.
      const firstPasses = send(1000 / (r * 1.18));
      expect(firstPasses, `${r}/${b}`).toBeGreaterThan(3 * b);
      expect(ev.capacityHigh(r, noise(r)), `${r}/${b}`).toBeNull();
      t += 1_050;
      send(1000 / (r * 1.32));
      // At the least rate that fits the ramp's cycle alone, the pause's refill explains it: the capacity is not bounded yet.
      const afterRamp = ev.bounds(0.5, r * 1.4, noise)!;
      expect(ev.capacityHigh(afterRamp.low, noise(afterRamp.low))!, `${r}/${b}`).toBeGreaterThan(firstPasses / 2);
      // A probe at 0.85x the rate, quiet for 2 s.
      t += 1_050;
      const quiet = send(1000 / (r * 0.85), Math.round(r * 0.85 * 2));
      expect(quiet, `${r}/${b}`).toBe(Math.round(r * 0.85 * 2));
      const fit = ev.bounds(0.5, r * 1.4, noise, false)!;
      expect(fit.low, `${r}/${b}`).toBeLessThanOrEqual(r);
      expect(fit.low, `${r}/${b}`).toBeGreaterThan(afterRamp.low);
      const cap = ev.capacityHigh(fit.low, noise(fit.low))!;
      expect(cap, `${r}/${b}`).toBeGreaterThanOrEqual(b);
      if (bounded) {
        expect(fit.low, `${r}/${b}`).toBeGreaterThanOrEqual(0.8 * r);
        expect(cap, `${r}/${b}`).toBeLessThan(firstPasses / 2);
      }
    }
  });

  it("the first requests sent together: a bucket of one token passed one of them, a bucket of several more; nothing said before the first 429", () => {
    const firstSegment = (capacity: number) => {
      const ev = new BucketEvidence();
      const admit = bucket(100, capacity);
      // A cold process: three requests one at a time, 40 ms apart; then a wave of four granted in one turn, again and again.
      const sends = [0, 40, 80, ...Array.from({ length: 40 }, (_, i) => 120 + Math.floor(i / 4) * 3)];
      for (const t of sends) {
        ev.sent(t);
        ev.settled(t);
        if (admit(t)) ev.passed(t);
        else {
          expect(ev.firstPassedTogether()).toBeNull();
          ev.closeAt(t);
          return ev;
        }
      }
      throw new Error("no 429");
    };
    expect(firstSegment(1).firstPassedTogether()).toBe(1);
    expect(firstSegment(10).firstPassedTogether()).toBeGreaterThanOrEqual(2);
  });

  it("60 passes within 60 ms after a 1 s pause, from 10 at the start: no bucket the first segment found full explains it; with that bound refuted (a bucket partly used before the run), only rates that refill the 60 in the pause fit", () => {
    const ev = new BucketEvidence();
    let t = 0;
    // `n` requests a millisecond apart that pass, then one that draws a 429.
    const segment = (n: number) => {
      for (let i = 0; i <= n; i++, t++) {
        ev.sent(t);
        ev.settled(t);
        if (i < n) ev.passed(t);
        else ev.closeAt(t);
      }
    };
    segment(10);
    t += 1_000;
    segment(60);
    const got = ev.bounds(0.5, 100, noise);
    expect(ev.capacityRefuted).toBe(true);
    expect(got).not.toBeNull();
    expect(got!.low).toBeGreaterThan(50);
    // ...and its single passes no longer say "a bucket of one token".
    expect(ev.firstPassedTogether()).toBeNull();
  });

  it("a bucket partly used before the run (150/s of 30 found with 8 tokens, 100/s of 20 with 5, 40/s of 10 with 3): once the first segment's bound on the capacity fits nothing, the rates that fit without it contain the bucket's; a full bucket keeps the bound", () => {
    for (const [r, b, start, rates] of [
      [150, 30, 8, [300, 170]],
      [100, 20, 5, [200, 120]],
      [40, 10, 3, [80, 50]],
    ] as Array<[number, number, number, number[]]>) {
      const ev = play(r, b, rates, 1_050, null, start);
      const got = ev.bounds(0.5, rates.at(-1)! * 1.02, noise);
      expect(ev.capacityRefuted, `${r}/${b} from ${start}`).toBe(true);
      expect(got, `${r}/${b} from ${start}`).not.toBeNull();
      expect(got!.low, `${r}/${b} from ${start}`).toBeLessThanOrEqual(r);
      expect(got!.high, `${r}/${b} from ${start}`).toBeGreaterThanOrEqual(r);
    }
    const full = play(150, 30, [300, 170]);
    expect(full.bounds(0.5, 173, noise)).not.toBeNull();
    expect(full.capacityRefuted).toBe(false);
  });
  it.each(["before", "after"] as const)("requests sent in one wave with the 429 that closes a cycle count in it, answered %s that 429 (a 5 req/s bucket of 20 still fits)", (order) => {
    const ev = new BucketEvidence();
    const wave = (t: number, passes: number, refused: number) => {
      for (let i = 0; i < passes + refused; i++) ev.sent(t);
      const pass = () => {
        ev.settled(t);
        ev.passed(t);
      };
      if (order === "before") for (let i = 0; i < passes; i++) pass();
      for (let i = 0; i < refused; i++) {
        ev.settled(t);
        ev.closeAt(t);
      }
      if (order === "after") for (let i = 0; i < passes; i++) pass();
    };
    // The bucket's 20 one per ms, the 21st refused; 600 ms later it holds 3: four sent at once, three pass.
    for (let t = 0; t < 20; t++) wave(t, 1, 0);
    wave(20, 0, 1);
    wave(620, 3, 1);
    const b = ev.bounds(0.5, 10, noise);
    expect(b).not.toBeNull();
    expect(b!.low).toBeLessThanOrEqual(5);
    expect(b!.high).toBeGreaterThanOrEqual(5);
  });
});
