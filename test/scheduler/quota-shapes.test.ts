/**
 * The real RequestScheduler against every quota shape of issue 10 §2, in virtual time
 * (quota-harness.ts: a fake clock and a model server; deterministic, no sleeps). What the
 * shapes must never see is asserted exactly: a request sent before a Retry-After elapsed.
 * How close each runs to the quota is the bench's job (real processes, BENCHMARKS.md); here
 * a loose bound catches a scheduler stuck far below a shape (the old estimator ran the
 * 40/s burst-10 bucket at 2.4× the least time).
 */
import { describe, expect, it } from "vitest";
import { QUOTA_MATRIX, type QuotaShape, type RetryAfterForm, type RunOptions, runShape, type ShapeResult } from "./quota-harness.js";

/**
 * Seeds 1-3 (or `seeds`) with timers a millisecond late and the CLI's cold start (and `extra` options): every
 * request done, no violation, each within `ratio` of the least time. The runs, for what else a test asserts.
 */
async function expectEachSeedWithin(shape: QuotaShape, ratio: number, seeds = [1, 2, 3], extra: RunOptions = {}): Promise<ShapeResult[]> {
  const runs: ShapeResult[] = [];
  for (const seed of seeds) {
    const r = await runShape(shape, { seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 }, ...extra });
    expect(r.accepted, `seed ${seed}`).toBeGreaterThanOrEqual(shape.requests);
    expect(r.violations, `seed ${seed}`).toBe(0);
    expect(r.ratio, `seed ${seed}`).toBeLessThan(ratio);
    runs.push(r);
  }
  return runs;
}

/** The phases a run's rate took from its first probe on: "unpaced" among them is the capacity measured again (relearnCapacity). */
function phasesFromFirstProbe(r: Awaited<ReturnType<typeof runShape>>): string[] {
  const phases = r.events.flatMap(({ e }) => (e.type === "rate" ? [e.phase] : []));
  return phases.slice(phases.indexOf("probe"));
}

/** The rates a run set from `atS` seconds into it on. */
function ratesAfter(r: ShapeResult, atS: number): number[] {
  return r.events.flatMap(({ atS: t, e }) => (e.type === "rate" && e.requestsPerSecond !== null && t >= atS ? [e.requestsPerSecond] : []));
}

/** The rate in force just before `atS` seconds into a run: the last one set before then (0 while unpaced from the start). */
function rateInForceAt(r: ShapeResult, atS: number): number {
  const set = r.events.flatMap(({ atS: t, e }) => (e.type === "rate" && e.requestsPerSecond !== null && t < atS ? [e.requestsPerSecond] : []));
  return set.at(-1) ?? 0;
}

describe("the scheduler against each quota shape (virtual time)", () => {
  // A pool writes a request turns after its grant, and asks the write gate then (transport.ts). The gate holds
  // writes back for a pause an answer began, not for the scheduler's own pause to a window's next opening,
  // set as soon as the window's allowance is granted: held there, each window's last grants went a window
  // late (seed 1 with 2 ms between grant and write: 300/10 s 1.31x, 100/3 s opened before 1.30x, 2,400/60 s
  // without Retry-After 1.34x; 1.06x, 1.08x and 1.03x with the gate as it is).
  for (const name of ["window 300/10 s", "window 100/3 s opened before the run", "window 2400/60 s no RA"]) {
    it(`${name}, each write 2 ms after its grant: a window's allowance goes in its window (seeds 1-3 within 1.1x)`, async () => {
      const shape = QUOTA_MATRIX.find((s) => s.name === name)!;
      await expectEachSeedWithin(shape, 1.1, [1, 2, 3], { writeDelayMs: 2 });
    });
  }
  for (const shape of QUOTA_MATRIX) {
    it(`${shape.name}: every request done, no Retry-After cut short, within 2x the least time, 429s under 10%`, async () => {
      const r = await runShape(shape);
      expect(r.accepted).toBeGreaterThanOrEqual(shape.requests);
      expect(r.violations).toBe(0);
      expect(r.ratio).toBeLessThan(2);
      expect(r.throttled / r.requests).toBeLessThan(0.1);
    });
  }

  it("a small burst answered with whole-second Retry-After no longer pins the rate to what one second accepted", async () => {
    const shape = QUOTA_MATRIX.find((s) => s.name === "bucket 40/s burst 10")!;
    const r = await runShape(shape);
    // The old estimator settled near 16 req/s (the burst plus one second's pause) and stayed.
    // Every rate set after the first probe (the one the ramp's 429 leaves, anywhere in its bracket)
    // is within 20% of the quota's 40/s.
    const probes = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null && (e.phase === "probe" || e.phase === "hold") ? [e.requestsPerSecond] : []));
    const later = probes.slice(1);
    expect(later.length).toBeGreaterThan(0);
    for (const rate of later) {
      expect(rate).toBeGreaterThan(32);
      expect(rate).toBeLessThan(48);
    }
    expect(r.ratio).toBeLessThan(1.25);
  });

  it("a Retry-After that names no wait (whole seconds cut down to 0, a date cut to its second and already past) is read as none, not held to a second's floor: 40/s burst 10, 200/s burst 5 and 50/s burst 5 each seed within 1.07x (1.117x, 1.166x and 1.184x with the floor)", async () => {
    const bucket = (rate: number, burst: number, retryAfter: RetryAfterForm): QuotaShape => ({
      name: `bucket ${rate}/s burst ${burst} ${retryAfter}`,
      kind: "bucket",
      rate,
      burst,
      retryAfter,
      requests: rate * 30,
    });
    await expectEachSeedWithin(bucket(40, 10, "seconds-floor"), 1.07);
    await expectEachSeedWithin(bucket(200, 5, "seconds-round"), 1.07);
    await expectEachSeedWithin(bucket(50, 5, "date-floor"), 1.07);
  });

  it("a window's wait cut down keeps the floor on its 0: 300 per 10 s in seconds cut down within 1.1x (1.476x read as no wait near the window's end), 50 per second in dates cut to the second within 1.4x (2.871x once its first 429 had named 821 ms)", async () => {
    await expectEachSeedWithin({ name: "window 300/10 s seconds-floor", kind: "window", rate: 300, burst: 10, retryAfter: "seconds-floor", requests: 900 }, 1.1);
    await expectEachSeedWithin({ name: "window 50/1 s date-floor", kind: "window", rate: 50, burst: 1, retryAfter: "date-floor", requests: 500 }, 1.4);
  });

  it("a window without Retry-After whose last allowed request passes out of order (timers a millisecond late) is still found as a window: done within 1.10x, not held at 0.5 req/s", async () => {
    // A request sent 0.1 ms after the first one refused arrived first and passed. Taken as the refusal's end,
    // the refusal after it began with a segment of no passes and was never taken for a window's: held at the
    // least rate, 2 seeds of 3 were not done in an hour of virtual time (runShape throws). Left out of the
    // window's allowance, the next window kept a request for the probe of its opening: 1.30x.
    await expectEachSeedWithin(QUOTA_MATRIX.find((s) => s.name === "window 2400/60 s no RA")!, 1.1);
  });

  it("a fixed window whose allowance 503 pauses (Retry-After) cut into segments is counted whole: within 1.4x, where it was taken for what followed the last pause", async () => {
    // A pause no 429 asked for ends a segment, not a window. Counted from the segment, the first window of seed 1
    // (three 503 pauses in its first seconds) gave an allowance of 42 of 300, sent each window after: 5.49x.
    const shape: QuotaShape = {
      name: "window 300/10 s 503 bursts",
      kind: "window",
      rate: 300,
      burst: 10,
      retryAfter: "seconds",
      requests: 1500,
      burst503: { probability: 0.01, length: 3, retryAfterSeconds: 1 },
    };
    await expectEachSeedWithin(shape, 1.4);
  });

  it("a burst of 503s naming a wait, answering the next requests, costs two pauses at most (the first 503 alone, the rest at once): the bucket refilled through the pause", async () => {
    // 40/s burst 10, 20 ms away: each request's 503 comes back before the next goes, so the first of a burst is
    // alone. After its pause the requests the bucket surely refilled go together, even in an evidence probe
    // (whose pacer holds one token, and which the pauses kept from its 429 to the run's end): before, each went
    // one at a time and most 503s were a pause of their own (seeds 1 and 4: 2.30 and 2.38 pauses a burst).
    const shape: QuotaShape = {
      name: "bucket 40/s burst 10 20 ms 503 bursts",
      kind: "bucket",
      rate: 40,
      burst: 10,
      retryAfter: "seconds",
      latencyMs: 20,
      jitterMs: 4,
      requests: 1300,
      burst503: { probability: 0.01, length: 3, retryAfterSeconds: 1 },
    };
    for (const seed of [1, 4]) {
      const r = await runShape(shape, { seed });
      // Pauses every worker took for a 503: its backoff events, those within 10 ms of each other one pause.
      const at = r.events.flatMap(({ atS, e }) => (e.type === "backoff" && e.status === 503 && e.scope === "all" ? [atS] : []));
      const pauses = at.filter((t, i) => i === 0 || t - at[i - 1]! > 0.01).length;
      const bursts = r.unavailable / 3;
      expect(bursts, `seed ${seed}`).toBeGreaterThan(5);
      expect(r.violations, `seed ${seed}`).toBe(0);
      expect(pauses / bursts, `seed ${seed}`).toBeLessThanOrEqual(2);
    }
  });

  it("a workspace window without Retry-After behind a limit before authentication: the short count of its first window is checked by requests, not waited out (each seed within 1.25x)", async () => {
    // Before: each window after the first sent 375 of its 600 and waited for the next (1.40x on seeds 1-3).
    await expectEachSeedWithin(QUOTA_MATRIX.find((s) => s.name.startsWith("window 600/30 s no RA behind"))!, 1.25);
  });

  it("a workspace window behind a limit before authentication: its 429s pace the window's allowance, not end the window (each seed within 1.4x, 429s under 3%)", async () => {
    // Before: every 429 of the bucket in front was taken for the window's end: 67 % of requests refused, 2.71x; 1.70x with a short allowance.
    for (const name of ["window 600/60 s behind a 20/s burst 4 limit before authentication 100 ms", "window 300/10 s date behind a 100/s burst 10 limit before authentication 50 ms"]) {
      const shape = QUOTA_MATRIX.find((s) => s.name === name)!;
      await expectEachSeedWithin(shape, 1.4);
      for (const seed of [1, 2, 3]) {
        const r = await runShape(shape, { seed, timerLateMs: 1 });
        expect(r.throttled / r.requests, `${name} seed ${seed}`).toBeLessThan(0.03);
      }
    }
  });

  it("a bucket another client spends too is not walked down: after 429s at rates it had proven, the rate grows again in quiet spells (AIMD); 20/s burst 2 with another at 5/s within 3.5x of what is left, 40/s burst 4 with another at 15/s within 2.3x (each of seeds 1-5)", async () => {
    // Before: each 429 at a rate proven within the quota lowered both bounds for good, 5 % at a time; 20/2
    // walked down to 0.6 req/s of the 15 left (seed 1: 11.9x; the others 3.5-4.2x), 40/4 1.80-2.42x. After:
    // 2.29-3.09x and 1.68-2.13x; since the first segment's capacity can be refuted (bucket-evidence.ts,
    // firstCapRefuted, and rate-control.ts refuteFirstCapacity), 20/2 is 2.35-3.40x (seed 1 3.05 -> 3.32,
    // seed 2 3.09 -> 3.40, seeds 3-5 better) and 40/4 1.64-2.18x.
    // The other client's bursts empty a bucket this small at any rate of ours: those 429s (3 % of our
    // requests) stay. With the look above a quiet hold (lookAboveHold) 40/4 is 1.64-2.23x: seed 2 2.180 -> 2.234x,
    // one look refused; over seeds 1-40 the geometric mean went 1.842 -> 1.796x and the worst 3.43 -> 2.57x.
    const shapes: QuotaShape[] = [
      { name: "bucket 20/s burst 2 another client 5/s", kind: "bucket", rate: 20, burst: 2, retryAfter: "seconds", requests: 1500, otherClientRps: 5 },
      { name: "bucket 40/s burst 4 another client 15/s", kind: "bucket", rate: 40, burst: 4, retryAfter: "seconds", requests: 2000, otherClientRps: 15 },
    ];
    await expectEachSeedWithin(shapes[0]!, 3.5, [1, 2, 3, 4, 5]);
    await expectEachSeedWithin(shapes[1]!, 2.3, [1, 2, 3, 4, 5]);
    // The mode itself: the run went contested, and a rate it set there was later raised above it without a 429 between.
    const r = await runShape(shapes[0]!, { seed: 1, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
    const contested = r.events.flatMap(({ e }) => (e.type === "rate" && e.phase === "contested" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : []));
    expect(contested.length).toBeGreaterThan(0);
    expect(contested.some((rate, i) => i > 0 && rate > contested[i - 1]!)).toBe(true);
  });

  it("a bucket another client drained when the capacity is measured again is not read as a few req/s: 40/s burst 4 with another client at 15/s, seed 38, within 4x and no rate under 5 req/s set (8.52x before: the replay put the bounds at [0.5, 2.4] after [16.8, 18.8] proven)", async () => {
    const shape: QuotaShape = { name: "bucket 40/s burst 4 another client 15/s", kind: "bucket", rate: 40, burst: 4, retryAfter: "seconds", requests: 2000, otherClientRps: 15 };
    const r = await runShape(shape, { seed: 38, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
    const late = ratesAfter(r, 10);
    expect(late.length).toBeGreaterThan(0);
    expect(Math.min(...late)).toBeGreaterThan(5);
    expect(r.ratio).toBeLessThan(4);
    expect(r.violations).toBe(0);
  });

  it("429s not about our rate (1% of requests refused whatever the rate, each naming 1 s) are kept to, not multiplied: every request done, no wait cut short, 429s under 2% of requests, within 2.2x on seeds 1-3 (the waits they name are 1.4x alone; five of seeds 1-16 run at 2.4-4.2x, an open weakness)", async () => {
    // A gateway's other counters, a limit shared with others: read as the quota's, each such 429 lowers the
    // bounds, and the run falls to contested AIMD. Harness 1.68-1.82x on these seeds, but 2.4-4.2x on five of
    // seeds 1-16; the real CLI on the simulator's `--fault 429:p=0.01` (600 SKUs, 40/s burst 10) 1.6-4.5x
    // (docs/server-variance.md). A regression guard, not the goal.
    const shape: QuotaShape = { name: "bucket 40/s burst 10, 1% refused at random", kind: "bucket", rate: 40, burst: 10, retryAfter: "seconds", requests: 1200, random429: 0.01 };
    for (const seed of [1, 2, 3]) {
      const r = await runShape(shape, { seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
      expect(r.accepted, `seed ${seed}`).toBeGreaterThanOrEqual(shape.requests);
      expect(r.violations, `seed ${seed}`).toBe(0);
      // The shape did refuse at random (about 12 of 1,200; without them this bucket draws 6), and the scheduler's own 429s stayed under 1 %.
      expect(r.throttled, `seed ${seed}`).toBeGreaterThanOrEqual(12);
      expect(r.throttled / r.requests, `seed ${seed}`).toBeLessThan(0.02);
      expect(r.ratio, `seed ${seed}`).toBeLessThan(2.2);
    }
  });

  it("after a slow first segment (60 requests one at a time, 9 ms apart, as the CLI's against a slow server): 100/s burst 10 each of seeds 1-5 within 1.24x, 100/s burst 1 within 1.5x", async () => {
    // That segment passed about 60 before its 429, which bounded the capacity at 60 for the run: every count
    // bound subtracted 60, and each quiet step of the probe took 4-6 s. Now the closed cycles bound the
    // capacity too, and a quiet probe replays the evidence (rate-control.ts quietEvidence). Seeds 1-5 before:
    // 1.248-1.265x and 1.552-1.579x; after: 1.199-1.204x and 1.381-1.438x.
    const slowStart: RunOptions = { coldStart: { requests: 60, gapMs: 9 } };
    const seeds = [1, 2, 3, 4, 5];
    await expectEachSeedWithin({ name: "bucket 100/s burst 10", kind: "bucket", rate: 100, burst: 10, retryAfter: "seconds", requests: 2000 }, 1.24, seeds, slowStart);
    await expectEachSeedWithin({ name: "bucket 100/s burst 1", kind: "bucket", rate: 100, burst: 1, retryAfter: "seconds", requests: 2000 }, 1.5, seeds, slowStart);
  });

  it("a server that stalls now and then (150 ms about every 2 s, what arrived decided together): the bounds' top never falls below 90 req/s for a 100/s bucket of 10, and each of seeds 1-5 is within 1.3x", async () => {
    // Seed 4 before: a cycle with passes answered late refuted the first segment's bound on the capacity, the
    // replay without it fitted [31.8, 54.2] after the probe at 104 req/s, and the run held under 54 (2.27x).
    const shape: QuotaShape = { name: "bucket 100/s burst 10", kind: "bucket", rate: 100, burst: 10, retryAfter: "seconds", requests: 2000 };
    const runs = await expectEachSeedWithin(shape, 1.3, [1, 2, 3, 4, 5], { timerLateMs: 2, serverStall: { everyMs: 2000, ms: 150 } });
    runs.forEach((r, i) => {
      const tops = r.events.flatMap(({ e }) => (e.type === "rate" && e.fitHigh !== null ? [e.fitHigh] : []));
      expect(tops.length, `seed ${i + 1}`).toBeGreaterThan(0);
      expect(Math.min(...tops), `seed ${i + 1}`).toBeGreaterThanOrEqual(90);
    });
  });

  it("a bucket emptied before the run (another client, or the run before) is not taken for a bucket of one token: 429s under 2%, within 1.25x", async () => {
    // The first request refused says the bucket started empty; the segment after the pause measures the capacity.
    // Before: 30 429s of 1,330 requests and 1.8x the least time (the run's first refusal read as the capacity).
    for (const name of ["bucket 40/s burst 10 drained at start", "bucket 10/s burst 100 drained at start"]) {
      const r = await runShape(QUOTA_MATRIX.find((s) => s.name === name)!);
      expect(r.throttled / r.requests, name).toBeLessThan(0.02);
      expect(r.ratio, name).toBeLessThan(1.25);
    }
  });

  it("a bucket of one token 20 ms away, after a start like the CLI's (three requests one at a time, then a wave), paced by send times: no pair after each pause, within 2.5x", async () => {
    // The three one at a time passed, so the first segment's count (burstHigh 4) let the pacer carry 0.9 of a
    // token at 50 req/s and up, though of the wave only one passed: every pause ended with a pair 2 ms apart, the
    // second refused, another second's pause. 200 req/s: a round trip is 4 token intervals, too many to pace from
    // answers (SPACED_MAX_LATENCY_SHARE), so the pacer alone paces it. With the carry: 4.15x. (100 req/s was paced by
    // send times too until that share went from 0.5 to 1.5: with the carry 2.35x here and 3.7x in a real run.)
    const shape: QuotaShape = { name: "bucket 200/s burst 1 20 ms", kind: "bucket", rate: 200, burst: 1, retryAfter: "seconds", latencyMs: 20, jitterMs: 2, requests: 5000 };
    const r = await runShape(shape, { coldStart: { requests: 3, gapMs: 5 } });
    expect(r.violations).toBe(0);
    expect(r.ratio).toBeLessThan(2.5);
  });

  it("a bucket of one token 20 ms away on a machine whose requests stall on the way: paced from answers, within 1.6x", async () => {
    // 60/s without burst, a round trip of 20 ms (1.2 token intervals), 5 % of requests up to 20 ms late. Paced by send
    // times alone (the round trip over half a token interval, before), each stall that brought two decisions within a
    // token interval drew a 429 and a second's pause, and each 429 lowered the bounds: 2.80x, 27 429s (a real run 2.3x).
    const shape: QuotaShape = { name: "bucket 60/s burst 1 20 ms", kind: "bucket", rate: 60, burst: 1, retryAfter: "seconds", latencyMs: 20, jitterMs: 2, requests: 1500 };
    const r = await runShape(shape, { coldStart: { requests: 3, gapMs: 5 }, stall: { probability: 0.05, ms: 20 } });
    expect(r.violations).toBe(0);
    expect(r.ratio).toBeLessThan(1.6);
  });

  it("a generous bucket 100 ms away: no probe above what the in-flight ceiling can send, and fewer requests in flight beyond the quota when the bucket runs dry", async () => {
    // 100/s burst 100 at a 600-SKU size, a start like the CLI's. Before: the ramp set 784 req/s where 32 in flight
    // 100 ms away send 320, the bracket it left was [87, 784] and the next probe went at 392 (320 again); the first
    // wave had 32 in flight (headroom before any rate of ours), the ramp doubled above the quota while the bucket
    // hid it: 62 429s of 1,362 (4.6 %). Now the bracket stops at what was sendable, 22 in flight unpaced, and the ramp
    // steps by 1.25 above the first segment's rate: 36 of 1,336.
    const shape: QuotaShape = { name: "bucket 100/s burst 100 100 ms", kind: "bucket", rate: 100, burst: 100, retryAfter: "seconds", latencyMs: 100, jitterMs: 10, requests: 1300 };
    const r = await runShape(shape, { concurrency: 32, coldStart: { requests: 3, gapMs: 5 } });
    const probes = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null && (e.phase === "probe" || e.phase === "hold") ? [e.requestsPerSecond] : []));
    expect(probes.length).toBeGreaterThan(0);
    // 32 in flight over the shortest round trip (100 ms less its jitter of 10): at most 356 req/s.
    for (const rate of probes) expect(rate).toBeLessThan(356);
    expect(r.violations).toBe(0);
    expect(r.throttled / r.requests).toBeLessThan(0.035);
    expect(r.ratio).toBeLessThan(1.2);
  });

  it("a bucket partly used before the run: a 429 below what the counts took as within the quota drops the first segment's bound on the capacity, and the run probes on without measuring it again (within 1.35x)", async () => {
    // 1.5 tokens of 10 at the start read as a bucket of 3: before, 27 429s and 1.66x the least time. Measured
    // again unpaced after that 429 (the code before the bound could be dropped there): 13 429s, 1.218x; now 8, 1.196x.
    const r = await runShape(QUOTA_MATRIX.find((s) => s.name === "bucket 40/s burst 10 1.5 tokens at start")!);
    expect(phasesFromFirstProbe(r)).not.toContain("unpaced");
    expect(r.throttled / r.requests).toBeLessThan(0.02);
    expect(r.ratio).toBeLessThan(1.35);
  });

  it("a bucket partly used before the run whose replay then fits no rate drops the first segment's bound on the capacity instead of holding where it put the rate until the capacity is measured again: 150/s burst 30 found with 8 tokens and 100/s burst 20 found empty, each seed within 1.25x, never unpaced after the first probe", async () => {
    // Before: the bounds kept the replay's 176-250 req/s for the 150/s bucket until a hold at 176 drew its
    // 429 and the capacity was measured again: 1.30-1.33x, and 100/20 1.31-1.34x. After: 1.15-1.19x, 1.20-1.21x.
    const shapes: QuotaShape[] = [
      { name: "bucket 150/s burst 30 8 tokens at start", kind: "bucket", rate: 150, burst: 30, retryAfter: "seconds", latencyMs: 2, jitterMs: 0.4, requests: 3750, startTokens: 8 },
      { name: "bucket 100/s burst 20 empty at start", kind: "bucket", rate: 100, burst: 20, retryAfter: "seconds", latencyMs: 2, jitterMs: 0.4, requests: 2500, startTokens: 0 },
    ];
    for (const shape of shapes) {
      await expectEachSeedWithin(shape, 1.25);
      for (const seed of [1, 2, 3]) {
        const r = await runShape(shape, { seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
        expect(phasesFromFirstProbe(r), `${shape.name} seed ${seed}`).not.toContain("unpaced");
      }
    }
  });

  it("a bucket partly used before the run whose replay stays consistent until a hold it proved draws a 429 drops the first segment's bound there, and probes within what fits without it instead of measuring the capacity again: 100/s burst 20 found with 5 tokens, each seed within 1.2x, never unpaced after the first probe", async () => {
    // Before: the replay kept 115.9-119.3 req/s until the hold at 115.9 drew its 429; the capacity measured
    // again, the run climbed back by quiet verdicts: 1.16, 1.23, 1.23x. After: 1.16x each.
    const shape: QuotaShape = {
      name: "bucket 100/s burst 20 5 tokens at start",
      kind: "bucket",
      rate: 100,
      burst: 20,
      retryAfter: "seconds",
      latencyMs: 2,
      jitterMs: 0.4,
      requests: 2500,
      startTokens: 5,
    };
    await expectEachSeedWithin(shape, 1.2);
    for (const seed of [1, 2, 3]) {
      const r = await runShape(shape, { seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
      expect(phasesFromFirstProbe(r), `seed ${seed}`).not.toContain("unpaced");
    }
  });

  it("after the ramp's 429 the first probe starts from the ramp's step before it (TCP's ssthresh), not from the middle of weak bounds", async () => {
    // 5/s without burst: the ramp's 8 req/s drew the 429 after 4 req/s went a whole step without one; the
    // bounds from counts were [0.7, 8], whose middle (2.4 req/s) took 8 s of quiet verdicts to climb from.
    const r = await runShape(QUOTA_MATRIX.find((s) => s.name === "bucket 5/s burst 1")!);
    const firstProbe = r.events.find(({ e }) => e.type === "rate" && e.phase === "probe")!.e as { requestsPerSecond: number };
    expect(firstProbe.requestsPerSecond).toBeGreaterThanOrEqual(4);
    expect(r.ratio).toBeLessThan(1.12);
  });

  it("--max-rps is a mean kept against timers that fire late: 200 req/s set, 194-200 sent, never more (a quota that never binds, timers up to 2 ms late)", async () => {
    const shape: QuotaShape = { name: "generous", kind: "bucket", rate: 2_000, burst: 2_000, retryAfter: "seconds", requests: 2_000 };
    const r = await runShape(shape, { seed: 5, maxRps: 200, timerLateMs: 2, coldStart: { requests: 3, gapMs: 5 } });
    expect(r.throttled).toBe(0);
    const rate = r.accepted / r.wallS;
    // Without the carry each grant waits for a whole token after a late timer: 5 ms + up to 2 ms, about 170 req/s.
    expect(rate).toBeGreaterThanOrEqual(194);
    expect(rate).toBeLessThanOrEqual(200.5);
  });

  it("the hold goes at the proven lower bound once the bucket showed 4 tokens or more, 1% below it for a bucket of fewer", async () => {
    // The margin lost 1% for the rest of the run wherever a few tokens absorb a late timer's catch-up anyway.
    const holds = (r: Awaited<ReturnType<typeof runShape>>) =>
      r.events.flatMap(({ e }) => (e.type === "rate" && e.phase === "hold" && e.requestsPerSecond !== null && e.fitLow != null ? [e.requestsPerSecond / e.fitLow] : []));
    // 200/s burst 20, 20 ms away, seed 3: the bounds narrow to within 5% with about 10 s of work left, and are held.
    const small = await runShape(QUOTA_MATRIX.find((s) => s.name === "bucket 200/s burst 20 20 ms")!, { seed: 3 });
    expect(holds(small).length).toBeGreaterThan(0);
    for (const share of holds(small)) expect(share).toBeCloseTo(1, 6);
    const oneToken = await runShape({ name: "20/1", kind: "bucket", rate: 20, burst: 1, retryAfter: "seconds", latencyMs: 0, jitterMs: 0, requests: 1000 });
    expect(holds(oneToken).length).toBeGreaterThan(0);
    for (const share of holds(oneToken)) expect(share).toBeCloseTo(0.99, 6);
  });

  it("with whole-second Retry-After no probe goes at the evidence's top (a sure pause that narrows the bounds no more than a probe at their middle): 100/s burst 20 100 ms away, every probe inside the bounds and each seed within 1.19x (1.212-1.224x with probes at the top)", async () => {
    const shape = QUOTA_MATRIX.find((s) => s.name === "bucket 100/s burst 20 100 ms")!;
    for (const seed of [1, 2, 3]) {
      const r = await runShape(shape, { seed, concurrency: 32, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
      const atTop = r.events.filter(({ e }) => e.type === "rate" && e.phase === "probe" && e.requestsPerSecond !== null && e.fitHigh != null && e.requestsPerSecond >= e.fitHigh * 0.999);
      expect(atTop, `seed ${seed}`).toEqual([]);
      expect(r.ratio, `seed ${seed}`).toBeLessThan(1.19);
      expect(r.violations).toBe(0);
    }
  });

  it("a bucket of one token on a busy machine: one request in flight, each a token interval after the send before it and as much later as that round trip was long, so stalls on the way refuse no pairs", async () => {
    // 100/s without burst, a tenth of the requests up to 30 ms late on the way: paced by send times alone, pairs a
    // stall let out together were refused, each a whole second's pause, and the run took 4.6x its least time
    // (4.7x when spaced a token interval after each send without the round trip's excess).
    const shape = QUOTA_MATRIX.find((s) => s.name === "bucket 100/s burst 1")!;
    const r = await runShape(shape, { stall: { probability: 0.1, ms: 30 } });
    // (Up to 200 req/s: beyond, the round trip is over half the token interval and the pacer alone goes on.)
    const paced = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null && e.requestsPerSecond <= 200 ? [e.inFlightLimit] : []));
    expect(paced.length).toBeGreaterThan(0);
    expect(paced.every((limit) => limit === 1)).toBe(true);
    expect(r.violations).toBe(0);
    expect(r.ratio).toBeLessThan(1.5);
    expect(r.throttled).toBeLessThan(10);
  });

  it("a fast bucket of two tokens is not taken for one: more than one request in flight once paced, within 1.3x", async () => {
    // Its first wave passed two together; counted by the first passes alone (one or two) it read as a bucket of one
    // token, was paced from answers (a round trip in each 5 ms interval) and ran at 1.60x its least time.
    const r = await runShape(QUOTA_MATRIX.find((s) => s.name === "bucket 200/s burst 2")!);
    const paced = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null ? [e.inFlightLimit] : []));
    expect(paced.length).toBeGreaterThan(0);
    expect(paced.every((limit) => limit > 1)).toBe(true);
    expect(r.ratio).toBeLessThan(1.3);
  });

  it("a fixed window's allowance goes out at once as each window opens: within 5% of the least time, and 429s only until the window's length is known", async () => {
    // A window taken as open early (its length from two whole-second ends short) goes one request first: one 429, not one per request in flight.
    for (const name of ["window 300/10 s", "window 30/3 s", "window 600/60 s date", "window 100/3 s opened before the run"]) {
      const shape = QUOTA_MATRIX.find((s) => s.name === name)!;
      const r = await runShape(shape);
      const windows = Math.ceil(r.accepted / shape.rate);
      // Paced as a bucket, the last window's allowance went out at the rate learned (300/10 s: 1.19).
      expect(r.ratio, name).toBeLessThan(1.05);
      // The first window's 429s are the requests in flight when it closed; once two ends are known, none.
      expect(r.throttled, name).toBeLessThanOrEqual(Math.min(windows, 3) + 4);
    }
  });

  it("a quota raised during a long run is found by a look above the quiet hold: 40/s burst 10 raised to 80/s burst 20 8 s in, 4,000 requests within 75 s on seeds 1-3 (97.4 s without the look), a rate over 60 in force from 50 s on, no violation", async () => {
    const shape: QuotaShape = {
      name: "40/s burst 10, 80/s burst 20 from 8 s",
      kind: "bucket",
      rate: 40,
      burst: 10,
      retryAfter: "seconds",
      requests: 4000,
      changeTo: { atS: 8, kind: "bucket", rate: 80, burst: 20 },
    };
    for (const seed of [1, 2, 3]) {
      const r = await runShape(shape, { seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
      expect(r.violations, `seed ${seed}`).toBe(0);
      expect(r.wallS, `seed ${seed}`).toBeLessThan(75);
      // The look: a probe above the hold with nothing bounding it from above (lookAboveHold), after the change and before the rate went over 50.
      const firstOver50 = r.events.find(({ atS, e }) => e.type === "rate" && atS > 8 && (e.requestsPerSecond ?? 0) > 50)?.atS ?? Infinity;
      const looks = r.events.filter(({ atS, e }) => e.type === "rate" && e.phase === "probe" && e.fitHigh === null && atS > 8 && atS < firstOver50);
      expect(looks.length, `seed ${seed}: a look above the hold after the change`).toBeGreaterThan(0);
      expect(rateInForceAt(r, 50), `seed ${seed}: the rate in force at 50 s`).toBeGreaterThan(60);
      for (const later of ratesAfter(r, 50)) expect(later, `seed ${seed}`).toBeGreaterThan(60);
    }
  });

  it("a log of the last few seconds naming its free slot as an HTTP-date is waited out at its length, not a second more: 30 per 3 s and 60 per 2 s each seed within 1.15x (1.33x and 1.50x waited out at the 4 s and 3 s between the whole seconds its dates named), 429s under 2%", async () => {
    for (const [n, s] of [
      [30, 3],
      [60, 2],
    ] as const) {
      const shape: QuotaShape = { name: `sliding ${n}/${s} s date`, kind: "sliding", rate: n, burst: s, retryAfter: "date", requests: (n / s) * 30 };
      const runs = await expectEachSeedWithin(shape, 1.15);
      for (const r of runs) expect(r.throttled / r.requests, shape.name).toBeLessThan(0.02);
    }
  });

  it("a window whose 429s name no wait is found by its refusal of seconds after many passed: each allowance goes out at once as its window opens, within 1.2x the least time and 429s under 2% (read as a token bucket: 200 per 2 s 2.18x, 2,400 per minute not done in an hour)", async () => {
    // 400 per 10 s: 429s at 3.1% when the next opening was polled for from the allowance's end, not from past the first refusal's length.
    const tenSeconds: QuotaShape = { name: "window 400/10 s no RA", kind: "window", rate: 400, burst: 10, retryAfter: "none", requests: 1200 };
    for (const shape of [QUOTA_MATRIX.find((s) => s.name === "window 200/2 s no RA")!, QUOTA_MATRIX.find((s) => s.name === "window 2400/60 s no RA")!, tenSeconds]) {
      const r = await runShape(shape);
      expect(
        r.events.some(({ e }) => e.type === "rate" && e.phase === "window"),
        shape.name,
      ).toBe(true);
      expect(r.ratio, shape.name).toBeLessThan(1.2);
      expect(r.throttled / r.requests, shape.name).toBeLessThan(0.02);
    }
  });

  it("a window found after 429s of a limit before it, whose count left out most of the window's passes, is not held to that count: 600 per 30 s without Retry-After behind a 100/s bucket, the CLI's slow start, seeds 1-5 within 1.3x (seed 1, counted at 11, sent 11-22 a window: 41.6x before)", async () => {
    const shape = QUOTA_MATRIX.find((s) => s.name === "window 600/30 s no RA behind a 100/s burst 100 limit before authentication (HTTP-date)")!;
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = await runShape(shape, { seed, timerLateMs: 2, coldStart: { requests: 60, gapMs: 9 } });
      expect(r.accepted, `seed ${seed}`).toBeGreaterThanOrEqual(shape.requests);
      expect(r.violations, `seed ${seed}`).toBe(0);
      expect(r.ratio, `seed ${seed}`).toBeLessThan(1.3);
    }
  });

  it("a window of a second whose 429s name no wait is told from the refusal right after the run's first passes, polled at a share of it: 200 per 1 s within 1.2x (1.88x read as a token bucket, polled by the backoff of the probe rate its refusal left), 429s under 5% (each second's opening is polled for)", async () => {
    const r = await runShape({ name: "window 200/1 s no RA", kind: "window", rate: 200, burst: 1, retryAfter: "none", requests: 5000 });
    expect(r.events.some(({ e }) => e.type === "rate" && e.phase === "window")).toBe(true);
    expect(r.ratio).toBeLessThan(1.2);
    expect(r.throttled / r.requests).toBeLessThan(0.05);
  });

  it("a quota of N per second (a fixed window of one second, whole-second Retry-After) is sent at close to N: the last rate set over 45 of 50, within 1.2x", async () => {
    // Its Retry-After reads as a token bucket's, and replayed as one it came out at 33-36 req/s, held for the run (1.45x).
    const r = await runShape(QUOTA_MATRIX.find((s) => s.name === "window 50/1 s")!);
    const rates = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : []));
    expect(rates.at(-1)).toBeGreaterThan(45);
    expect(r.ratio).toBeLessThan(1.2);
  });

  it("a quota of N per second with the CLI's cold start (its first three requests one at a time, 20 ms apart) and timers 1 ms late: once the probe at the first segment's least capacity per second goes quiet, all its passes per second are probed: the last rate set over 47 of 50 (44.6 before, held for the run), within 1.2x", async () => {
    const r = await runShape(QUOTA_MATRIX.find((s) => s.name === "window 50/1 s")!, { concurrency: 32, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
    const rates = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : []));
    expect(rates.at(-1)).toBeGreaterThan(47);
    expect(rates.at(-1)).toBeLessThanOrEqual(50);
    expect(r.ratio).toBeLessThan(1.2);
    expect(r.violations).toBe(0);
  });

  /** 100 per second as a fixed window of one second opened `phaseMs` before the run, run as the CLI runs (cold start, timers 1 ms late). */
  async function counterPerSecondAtPhase(phaseMs: number) {
    const shape: QuotaShape = { name: `window 100/1 s, phase ${phaseMs}`, kind: "window", rate: 100, burst: 1, retryAfter: "seconds", requests: 2000, windowPhaseMs: phaseMs };
    const r = await runShape(shape, { seed: 1, concurrency: 32, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
    const rates = r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : []));
    return { r, rates };
  }

  it("a counter per second whose first burst crossed a second's start (phase 900 ms) is held just under its allowance, not where the bucket replay put it: last rate 99 of 100 (71.8 before, 1.435x), within 1.2x", async () => {
    const { r, rates } = await counterPerSecondAtPhase(900);
    expect(rates.at(-1)).toBeGreaterThanOrEqual(95);
    expect(rates.at(-1)).toBeLessThanOrEqual(100);
    expect(r.ratio).toBeLessThan(1.2);
    expect(r.violations).toBe(0);
  });

  it("a counter per second whose counts crossed a second's start (phase 500 ms) is no longer held above its allowance: fewer 429s than the 17 of the bucket reading, last rate at most 100, within 1.2x", async () => {
    const { r, rates } = await counterPerSecondAtPhase(500);
    expect(rates.at(-1)).toBeLessThanOrEqual(100);
    expect(r.throttled).toBeLessThan(17);
    expect(r.ratio).toBeLessThan(1.2);
  });

  it("a hold under N per second looks above N once quiet, as the evidence that fitted N may be a bucket's: a counter of 20 per second that becomes a bucket of 60/s burst 20 8 s in is found by a look at 25 after the change: the rate in force at 40 s and every one set after within (55, 60], the run within 70 s (held at 19 for 134 s before), seeds 1-3", async () => {
    // The server written apart from ours (HTTP-date waits) had a 50/s bucket of 5 tokens fitted as 19 per second from the
    // ramp's three 429s, and held at 18 req/s for the rest of the run (2.83x): nothing looked above such a hold. The harness
    // did not reproduce that fit (96 runs); a counter per second that gives way to a faster bucket leaves the same hold.
    const shape: QuotaShape = {
      name: "window 20/1 s then bucket 60/s burst 20",
      kind: "window",
      rate: 20,
      burst: 1,
      retryAfter: "seconds",
      requests: 2500,
      changeTo: { atS: 8, kind: "bucket", rate: 60, burst: 20 },
    };
    for (const seed of [1, 2, 3]) {
      const r = await runShape(shape, { seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
      const holds = r.events.filter(({ atS, e }) => e.type === "rate" && e.phase === "hold" && e.requestsPerSecond === 19 && atS < 8);
      expect(holds.length, `seed ${seed}: held under 20 per second first`).toBeGreaterThan(0);
      const looks = r.events.filter(({ atS, e }) => e.type === "rate" && e.phase === "probe" && e.requestsPerSecond === 25 && atS > 8);
      expect(looks.length, `seed ${seed}: a look at 1.25 x 20 after the change`).toBeGreaterThan(0);
      for (const rate of [rateInForceAt(r, 40), ...ratesAfter(r, 40)]) {
        expect(rate, `seed ${seed}`).toBeGreaterThan(55);
        expect(rate, `seed ${seed}`).toBeLessThanOrEqual(60);
      }
      expect(r.wallS, `seed ${seed}`).toBeLessThan(70);
      expect(r.violations, `seed ${seed}`).toBe(0);
    }
  });

  it("a counter of N per second pays for its looks above N with a second or so each: 100 per second over 60 s, seeds 1-3, a look at 125, refused (the hold at 99 comes back and is the last rate set), within 1.07x (1.037x without a look, 1.085x looking twice at 5 % of the work left)", async () => {
    const shape: QuotaShape = { name: "window 100/1 s for 60 s", kind: "window", rate: 100, burst: 1, retryAfter: "seconds", requests: 6000 };
    const runs = await expectEachSeedWithin(shape, 1.07);
    for (const r of runs) {
      const looks = r.events.filter(({ e }) => e.type === "rate" && e.phase === "probe" && e.requestsPerSecond === 125);
      expect(looks.length).toBeGreaterThan(0);
      expect(ratesAfter(r, 0).at(-1)).toBe(99);
    }
  });

  it("a bucket whose burst equals its rate, whose first two cycles fit N per second too, is held under that N only until its 429: then it is read as a bucket again and held at its rate, within 1.05x", async () => {
    const r = await runShape(QUOTA_MATRIX.find((s) => s.name === "bucket 150/s burst 150")!, { seed: 1, concurrency: 32, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
    const holds = r.events.flatMap(({ e }) => (e.type === "rate" && e.phase === "hold" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : []));
    // The first two cycles passed 171 per second: held at 170 until the bucket's burst ran out.
    expect(holds.some((rate) => rate > 160)).toBe(true);
    expect(holds.at(-1)).toBeGreaterThan(140);
    expect(holds.at(-1)).toBeLessThan(152);
    expect(r.ratio).toBeLessThan(1.05);
  });

  it("a small bucket whose server stalls now and then (requests held in the stall decided together at its end) draws no burst into the tokens that batch spent: 200/s burst 5, stalls of up to 30 ms about every second, each of seeds 1-2 within 1.3x and under 10 x 429", async () => {
    // Without the pacer taking a late answer's token again (scheduler.ts decidedLate): 1.51x and 1.38x, 14 x 429 each; with it 7 and 8.
    const shape: QuotaShape = { name: "bucket 200/s burst 5 server stalls", kind: "bucket", rate: 200, burst: 5, retryAfter: "seconds", requests: 5000 };
    const runs = await expectEachSeedWithin(shape, 1.3, [1, 2], { serverStall: { everyMs: 1000, ms: 30 } });
    for (const r of runs) expect(r.throttled).toBeLessThan(10);
  });

  it("a limit on requests in flight, not on rate (4 served at once, each 50-150 ms), is found from where its 429s fall and sent up to unpaced: each of seeds 1-3 within 1.3x (1.70x paced at the rate its 429s suggested), the limit found once and never refuted", async () => {
    const shape: QuotaShape = {
      name: "4 in flight served 50-150 ms",
      kind: "bucket",
      rate: 100_000,
      burst: 100_000,
      retryAfter: "seconds",
      requests: 1300,
      maxInFlight: { n: 4, serviceMs: 100, jitterMs: 50 },
    };
    for (const r of await expectEachSeedWithin(shape, 1.3)) {
      // Found, the limit stays: every rate event from it on is unpaced up to 4, with the limit in force.
      const at = r.events.findIndex(({ e }) => e.type === "rate" && e.inFlightFound);
      expect(at).toBeGreaterThan(0);
      for (const { e } of r.events.slice(at)) if (e.type === "rate") expect([e.requestsPerSecond, e.inFlightLimit, e.inFlightFound]).toEqual([null, 4, true]);
    }
  });

  it("503 bursts do not lower the rate: it ends as high as without them", async () => {
    const base = QUOTA_MATRIX.find((s) => s.name === "bucket 60/s burst 10 503 bursts")!;
    const without = await runShape({ ...base, burst503: undefined });
    const withBursts = await runShape(base);
    const last = (r: typeof without) => r.events.flatMap(({ e }) => (e.type === "rate" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : [])).at(-1)!;
    expect(withBursts.unavailable).toBeGreaterThan(0);
    expect(last(withBursts)).toBeGreaterThan(0.9 * last(without));
  });

  it("in flight follows rate x latency: 100 ms away, more than 4 requests are in flight", async () => {
    const shape = QUOTA_MATRIX.find((s) => s.name === "bucket 100/s burst 20 100 ms")!;
    const r = await runShape(shape);
    const limits = r.events.flatMap(({ e }) => (e.type === "rate" ? [e.inFlightLimit] : []));
    expect(Math.max(...limits)).toBeGreaterThanOrEqual(10);
  });
  it("slow buckets of a large burst whose 429s name no wait: 5/s burst 20 draws under a fifth of its requests as 429 (44% when the evidence lost a wave's passes), 20/s burst 50 behind 20 ms under 8% (16% when a probe outlived its own 429)", async () => {
    const slow = await runShape({ name: "5/20 no RA", kind: "bucket", rate: 5, burst: 20, retryAfter: "none", requests: 145 });
    expect(slow.accepted).toBeGreaterThanOrEqual(145);
    expect(slow.throttled / slow.requests).toBeLessThan(0.2);
    const far = await runShape({ name: "20/50 no RA 20 ms", kind: "bucket", rate: 20, burst: 50, retryAfter: "none", latencyMs: 20, jitterMs: 3, requests: 550 });
    expect(far.accepted).toBeGreaterThanOrEqual(550);
    expect(far.throttled / far.requests).toBeLessThan(0.08);
  });
});
