/**
 * A run that starts from what an earlier run against the same server learned of its quota
 * (RequestScheduler's startFrom, kept in the database by the sync), in virtual time against the
 * model server (quota-harness.ts): deterministic, no sleeps. A daemon's incremental cycles are a few
 * dozen requests, and finding the quota afresh cost each of them its first 429s and their pauses.
 */
import { describe, expect, it } from "vitest";
import type { LearnedQuota } from "../../src/scheduler/rate-control.js";
import { QUOTA_MATRIX, type QuotaShape, type RunOptions, runShape } from "./quota-harness.js";

const shape = (name: string): QuotaShape => QUOTA_MATRIX.find((s) => s.name === name)!;
/** As the CLI runs: timers a millisecond late, its first requests one at a time. */
const real = (seed: number, more: RunOptions = {}): RunOptions => ({ seed, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 }, ...more });

/** What a whole run of `s` learned (the quota found afresh). */
async function learnedFrom(s: QuotaShape, seed: number): Promise<LearnedQuota> {
  const r = await runShape(s, real(seed));
  if (r.lesson.kind !== "learned") throw new Error(`${s.name}: the run learned nothing (${r.lesson.kind})`);
  return r.lesson.quota;
}

describe("what a run held under N per second teaches (virtual time)", () => {
  it("a run that ends while held under the N per second a bucket of burst = rate fitted (not refused there yet) teaches the bucket's bounds, not N: 150/s burst 150, held at 170 from its second 429, ends 5 s in; the lesson is under 155", async () => {
    const s = { ...shape("bucket 150/s burst 150"), requests: 900 };
    const r = await runShape(s, { seed: 1, concurrency: 32, timerLateMs: 1, coldStart: { requests: 3, gapMs: 20 } });
    const holds = r.events.flatMap(({ e }) => (e.type === "rate" && e.phase === "hold" && e.requestsPerSecond !== null ? [e.requestsPerSecond] : []));
    expect(holds.at(-1), "the run ended in the hold under N").toBeGreaterThan(160);
    expect(r.lesson.kind).toBe("learned");
    if (r.lesson.kind !== "learned") return;
    expect(r.lesson.quota.low).toBeLessThan(155);
    expect(r.lesson.quota.high).toBeLessThan(165);
  });
});

describe("a run started from the quota an earlier run learned (virtual time)", () => {
  // Buckets with and without burst, Retry-After in each form, behind latency.
  const shapes = ["bucket 40/s burst 10", "bucket 200/s burst 20 20 ms", "bucket 30/s burst 5 no RA", "bucket 50/s burst 5 date-floor", "bucket 5/s burst 1", "bucket 100/s burst 20 100 ms"];
  for (const name of shapes) {
    it(`${name}: a short run (an incremental cycle, 2.5 s of work) draws no 429 where one that finds the quota afresh draws some, and ends sooner`, async () => {
      for (const seed of [1, 2, 3]) {
        const prior = await learnedFrom(shape(name), seed);
        const short = { ...shape(name), requests: Math.max(10, Math.round(2.5 * shape(name).rate)) };
        const fresh = await runShape(short, real(seed + 10));
        const started = await runShape(short, real(seed + 10, { startFrom: prior }));
        expect(fresh.throttled, `seed ${seed}: finding the quota afresh`).toBeGreaterThan(0);
        expect(started.throttled, `seed ${seed}`).toBe(0);
        expect(started.violations, `seed ${seed}`).toBe(0);
        expect(started.wallS, `seed ${seed}`).toBeLessThan(fresh.wallS);
        // Nothing new learned: what it started from stands (the database keeps it, aging).
        expect(started.lesson.kind, `seed ${seed}`).toBe("nothing");
      }
    });
  }

  it("a long run holds at what was learned and looks above it exactly once (a quota may have risen), with 429s under 1 % and a lesson kept", async () => {
    const s = shape("bucket 40/s burst 10");
    for (const seed of [1, 2, 3]) {
      const prior = await learnedFrom(s, seed);
      const r = await runShape(s, real(seed + 10, { startFrom: prior }));
      const looks = r.events.filter(({ e }) => e.type === "rate" && e.phase === "probe" && (e.requestsPerSecond ?? 0) >= prior.high! * 1.09);
      expect(looks.length, `seed ${seed}: looked above ${prior.high}`).toBe(1);
      expect(r.violations, `seed ${seed}`).toBe(0);
      expect(r.throttled / r.requests, `seed ${seed}`).toBeLessThan(0.01);
      expect(r.lesson.kind, `seed ${seed}`).toBe("learned");
    }
  });

  it("a quota lowered since (40/s to 20/s): the first 429 at the rate learned finds it afresh, no Retry-After cut short, 429s under 2 %, and the new rate is kept", async () => {
    const lowered: QuotaShape = { name: "bucket 20/s burst 5", kind: "bucket", rate: 20, burst: 5, retryAfter: "seconds", requests: 1000 };
    for (const seed of [1, 2, 3]) {
      const prior = await learnedFrom(shape("bucket 40/s burst 10"), seed);
      const r = await runShape(lowered, real(seed, { startFrom: prior }));
      expect(r.accepted, `seed ${seed}`).toBeGreaterThanOrEqual(lowered.requests);
      expect(r.violations, `seed ${seed}`).toBe(0);
      expect(r.throttled / r.requests, `seed ${seed}`).toBeLessThan(0.02);
      expect(r.ratio, `seed ${seed}`).toBeLessThan(1.3);
      expect(r.lesson.kind === "learned" && r.lesson.quota.low, `seed ${seed}`).toBeLessThanOrEqual(20.2);
    }
  });

  it("a quota raised since (20/s to 80/s): a long run finds it (within 1.6x of its least time), not held at 20/s (4.05x for real before the look above)", async () => {
    const raised: QuotaShape = { name: "bucket 80/s burst 10", kind: "bucket", rate: 80, burst: 10, retryAfter: "seconds", requests: 2400 };
    for (const seed of [1, 2, 3]) {
      const prior = await learnedFrom({ name: "bucket 20/s burst 5", kind: "bucket", rate: 20, burst: 5, retryAfter: "seconds", requests: 800 }, seed);
      expect(prior.low, `seed ${seed}`).toBeLessThan(21);
      const r = await runShape(raised, real(seed, { startFrom: prior }));
      expect(r.violations, `seed ${seed}`).toBe(0);
      expect(r.ratio, `seed ${seed}`).toBeLessThan(1.6);
      expect(r.lesson.kind === "learned" && r.lesson.quota.low, `seed ${seed}`).toBeGreaterThan(70);
    }
  });

  it("a bucket emptied before the run (another client, the run before): its first request's 429 is excused once, and the run goes on at the rate learned instead of measuring the quota again (1.54x for real before)", async () => {
    for (const seed of [1, 2, 3]) {
      const prior = await learnedFrom(shape("bucket 40/s burst 10"), seed);
      const r = await runShape({ ...shape("bucket 40/s burst 10 drained at start"), requests: 300 }, real(seed + 10, { startFrom: prior }));
      expect(r.throttled, `seed ${seed}`).toBe(1);
      expect(r.violations, `seed ${seed}`).toBe(0);
      // No unpaced segment: the rate set at the start is the only one until the end (a short run does not look above).
      expect(
        r.events.filter(({ e }) => e.type === "rate").map(({ e }) => (e.type === "rate" ? e.phase : null)),
        `seed ${seed}`,
      ).toEqual(["hold"]);
      expect(r.lesson.kind, `seed ${seed}`).not.toBe("forget");
      // 7.5 s of least time and the second the first 429 names: about 1.14.
      expect(r.ratio, `seed ${seed}`).toBeLessThan(1.2);
    }
  });

  it("a fixed window proves no steady rate: its run's lesson is to forget what was kept", async () => {
    const r = await runShape(shape("window 300/10 s"), real(1));
    expect(r.throttled).toBeGreaterThan(0);
    expect(r.lesson.kind).toBe("forget");
  });

  it("not adaptive (rateLimit.adaptive false): nothing is started from and nothing learned", async () => {
    const s = shape("bucket 40/s burst 10");
    const prior = await learnedFrom(s, 1);
    const r = await runShape({ ...s, requests: 300 }, real(2, { startFrom: prior, adaptive: false }));
    expect(r.events.some(({ e }) => e.type === "rate")).toBe(false);
    expect(r.lesson.kind).toBe("nothing");
  });
});
