/**
 * What the run's requests showed about the server's quota, taken as a token bucket (rate r,
 * capacity B), and the rates consistent with all of it: a joint replay of r and B.
 *
 * - The run's first segment (unpaced, from a bucket we take as full, to the first 429) ties B to
 *   r: its passes came from B plus what r refilled while they went out, and the 429 that closed
 *   it found under one token. For each r that leaves B within a token or two.
 * - Every cycle since, from one 429 episode to the next (the server's bucket under one token at
 *   both ends), replayed through a bucket of that capacity: every pass found a token (too slow
 *   a refill could not have passed them), and the closing 429 found under one (too fast a
 *   refill would have left one for it).
 * A rate is consistent when some capacity in its range passes both tests for every cycle kept.
 * Send times stand in for arrival times (the same transit for all, but for jitter): every test
 * allows `noise` tokens, a few plus the rate × the jitter. Counts over whole cycles, not single
 * timings: a send time off by some milliseconds moves a level by r × that error, once.
 *
 * Why jointly: capacity and rate trade against each other. Bounded apart, the capacity's range
 * comes from the first segment's length times a rate not yet known (tens of milliseconds on a
 * cold process at up to 500 req/s: ±15 tokens), and the rate's bounds from the ramp's cycle
 * were then 131–528 req/s for a 200 req/s quota.
 */

/** Cycles kept for the replay: the latest say the most about a quota that may change. */
const CYCLES_KEPT = 4;
/** The rate grid's step (ratio): bounds finer than this are lost in the noise anyway. */
const GRID_STEP = 1.005;
/** ...searched first in steps of this, then finely only where a coarse step fits (a 429 costs ~150 coarse tests, not ~1,400). */
const COARSE_STEP = 1.05;
/**
 * A cycle replays at most this many passes: a long hold (minutes at 200 req/s) would otherwise
 * make each 429's search block the event loop for a second. Beyond it the oldest half is dropped
 * and the cycle starts at the cut with a bucket anywhere from empty to full, which keeps every
 * test on the safe side.
 */
const MAX_CYCLE_PASSES = 4_000;
/** Bisection steps for the capacity: a twentieth of a token on a range of 40. */
const CAPACITY_STEPS = 10;
/** Requests granted in one turn of the scheduler go out within this of one another (firstPassedTogether). */
const TOGETHER_MS = 1;
/** A request the first 429 may have overtaken on the way (sent at the same millisecond). */
const OVERTAKEN = 1;

interface Cycle {
  startAt: number;
  /** Send times of the requests that passed. */
  passes: number[];
  /** ...and of every request that may have taken a token (503s, requests unanswered at the close). */
  taken: number[];
  closedAt: number | null;
  /** Cut at `startAt` (MAX_CYCLE_PASSES): the bucket then held anything up to its capacity, not under one token. */
  truncated: boolean;
}

interface FirstSegment {
  startAt: number;
  passes: number[];
  closedAt: number;
  /** Passes sent before the closing 429, and requests sent before it still unanswered then. */
  before: number;
  /** The most passes sent within TOGETHER_MS of one another (firstPassedTogether). */
  passedTogether: number;
}

export interface RateBounds {
  low: number;
  high: number;
}

export class BucketEvidence {
  private runStartAt: number | null = null;
  private firstPasses: number[] = [];
  private first: FirstSegment | null = null;
  private current: Cycle | null = null;
  private closed: Cycle[] = [];
  private readonly outstanding = new Map<number, number>();
  /**
   * The first segment no longer bounds the capacity from above: a replay under that bound fitted no
   * rate (bounds). Its passes came from a bucket that was not full (another client, or the run
   * before, had used part of it), and the bound from them was too low: a 150/s bucket of 30 found
   * with 8 tokens fitted 176-250 req/s after the ramp, none after the next probe, and the run's
   * bounds kept 176 until a hold there drew its 429 (harness 1.30-1.33x, 1.19 with the bound
   * refuted; 100/s burst 20 found empty 1.31-1.34x -> 1.21; full buckets unchanged).
   */
  private firstCapRefuted = false;

  /** The first segment's bound on the capacity from above was refuted (firstCapRefuted). */
  get capacityRefuted(): boolean {
    return this.firstCapRefuted;
  }

  /** Drop the first segment's bound on the capacity: a 429 came where the replay under it said the quota held. */
  refuteCapacity(): void {
    this.firstCapRefuted = true;
  }

  sent(at: number): void {
    this.runStartAt ??= at;
    this.outstanding.set(at, (this.outstanding.get(at) ?? 0) + 1);
  }

  /** The request sent at `at` was answered (whatever the answer). */
  settled(at: number): void {
    const n = this.outstanding.get(at) ?? 0;
    if (n > 1) this.outstanding.set(at, n - 1);
    else this.outstanding.delete(at);
  }

  passed(at: number): void {
    // A request sent before this evidence began (a run that started over, rate-control.ts) says nothing here.
    if (this.runStartAt === null || at < this.runStartAt) return;
    if (!this.first) this.firstPasses.push(at);
    const c = this.current;
    if (c && at > c.startAt) {
      c.passes.push(at);
      c.taken.push(at);
      if (c.passes.length > MAX_CYCLE_PASSES) truncate(c);
      return;
    }
    // Sent with the 429 that closed the last cycle (in one wave) and answered after it: the cycle's (closeAt).
    const last = this.closedWith(at);
    if (last) {
      last.passes.push(at);
      last.taken.push(at);
    } else if (this.first && !this.closed.length && at === this.first.closedAt) {
      this.first.passes.push(at);
      this.first.before++;
      this.first.passedTogether = mostWithin(this.first.passes, TOGETHER_MS);
    }
  }

  /** A request that may have spent a token without passing (a 503). */
  spent(at: number): void {
    const c = this.current;
    if (c && at > c.startAt) c.taken.push(at);
    else this.closedWith(at)?.taken.push(at);
  }

  /** The last closed cycle when `at` is the send time of the 429 that closed it (closeAt). */
  private closedWith(at: number): Cycle | null {
    const last = this.closed.at(-1);
    return last && at === last.closedAt && at > last.startAt ? last : null;
  }

  /** The cycle closed last is not replayed: a stall of the server decided its requests at times we do not know (rate-control.ts learnFromEvidence). */
  forgetLastCycle(): void {
    this.closed.pop();
  }

  /** The bucket was not refilled steadily (a window's long pause): the cycle in course says nothing. */
  invalidate(): void {
    this.current = null;
  }

  /**
   * A new 429 episode: its first 429 was sent at `at`. Closes the cycle in course and opens the next.
   * Requests sent at the same moment as that 429 (granted in one wave) belong to the cycle it closes,
   * whichever answer came first: the server took them as it took the 429, and their passes, dropped
   * from both cycles, left a 5 req/s bucket's cycle of 0.6 s with none and the replay put the rate at
   * 2.3-2.5 req/s (harness, burst 20 without Retry-After).
   */
  closeAt(at: number): void {
    const pending = this.pendingBefore(at);
    if (!this.first && this.runStartAt !== null) {
      const passes = this.firstPasses.filter((t) => t <= at).sort((a, b) => a - b);
      this.first = { startAt: this.runStartAt, passes, closedAt: at, before: passes.length + pending.length, passedTogether: mostWithin(passes, TOGETHER_MS) };
    }
    const c = this.current;
    if (c) {
      c.closedAt = at;
      c.passes = c.passes.filter((t) => t <= at).sort((a, b) => a - b);
      c.taken = [...c.taken.filter((t) => t <= at), ...pending.filter((t) => t > c.startAt)].sort((a, b) => a - b);
      this.closed.push(c);
      if (this.closed.length > CYCLES_KEPT) this.closed.shift();
    }
    this.current = { startAt: at, passes: [], taken: [], closedAt: null, truncated: false };
  }

  /**
   * The most passes of the first segment sent within TOGETHER_MS of one another (null before it
   * closed): requests granted together reach the server together, and a bucket of two or more tokens
   * passes two of them. One when none passed together: of a wave only one passed, or nothing went
   * out together and still the bucket refused a request sent alone (4 real runs of 6 at 100 req/s
   * without burst showed the wave; in the other 2 the 429 came alone, 1 ms and 50 ms after a pass).
   */
  firstPassedTogether(): number | null {
    // Refuted, the first segment came from a bucket partly used: one pass of it says nothing of the capacity.
    if (this.firstCapRefuted) return null;
    return this.first?.passedTogether ?? null;
  }

  /** The least capacity the first segment shows at rate `r` (1 before it closed). */
  capacityLow(r: number, noise: number): number {
    return this.first ? capacityRange(this.first, r, noise)[0] : 1;
  }

  /**
   * The most capacity the closed cycles allow at rate `r` (null before one closed): each closing 429
   * found under one token (and `noise`), and a bucket of more capacity, refilled as fast, would have
   * held more then. At the least rate that fits, this bounds the capacity at any rate that fits (more
   * refill, more tokens at the close). The first segment's passes bound it too, but only as they would
   * from a bucket that filled at no rate: the real CLI's first segment is slow (its first requests one at a
   * time), and 61 passes before the first 429 of a 100/s bucket of 10 left the bound at 61.
   */
  capacityHigh(r: number, noise: number): number | null {
    const first = this.first;
    if (!first || !this.closed.length) return null;
    const [, most] = capacityRange(first, r, noise, this.firstCapRefuted ? this.mostPassed() : 0);
    const closesUnder = (cap: number) => this.closed.every((c) => levelAt(c.taken, c.startAt, c.closedAt!, r, cap) <= 1 + noise);
    if (closesUnder(most)) return most;
    if (!closesUnder(1)) return null;
    // More capacity, more tokens at every close: the first that fails is the bound (a tenth of a token short at worst).
    return bisectCapacity(1, most, (cap) => !closesUnder(cap))[1];
  }

  /**
   * Rates in [from, to] consistent with everything kept, or null when none is (not a token bucket, or
   * noise beyond ours). When none is under the first segment's bound on the capacity, that bound is
   * dropped for the rest of the run (firstCapRefuted) and the replay tried again without it.
   */
  bounds(from: number, to: number, noiseAt: (rate: number) => number, mayRefute = true): RateBounds | null {
    const first = this.first;
    if (!first || !this.closed.length || !(to > from) || !Number.isFinite(to)) return null;
    const fit = this.fit(first, from, to, noiseAt);
    if (fit || this.firstCapRefuted || !mayRefute) return fit;
    this.firstCapRefuted = true;
    return this.fit(first, from, to, noiseAt);
  }

  private fit(first: FirstSegment, from: number, to: number, noiseAt: (rate: number) => number): RateBounds | null {
    let low = Infinity;
    let high = -Infinity;
    // Each step of the grid stands for the rates between it and the next: the tests that a faster
    // refill passes (every pass found a token) at its top, the others at its bottom. A set of rates
    // narrower than a step (exact timings, a long cycle) is then not stepped over.
    const fits = (r: number, step: number) => this.consistent(first, r, r * step, noiseAt(r * step));
    for (let c = from; c <= to; c *= COARSE_STEP) {
      if (!fits(c, COARSE_STEP)) continue;
      for (let r = c; r < c * COARSE_STEP && r <= to; r *= GRID_STEP) {
        if (!fits(r, GRID_STEP)) continue;
        if (r < low) low = r;
        high = r * GRID_STEP;
      }
    }
    return Number.isFinite(low) ? { low, high } : null;
  }

  /**
   * Some capacity in the first segment's range lets a bucket refilled at a rate in [rLow, rHigh]
   * produce every cycle kept: the least capacity under which every pass found a token at rHigh
   * (more capacity or refill, more tokens), and under it the closing 429s found under one at rLow
   * (less capacity or refill, fewer tokens).
   */
  private consistent(first: FirstSegment, rLow: number, rHigh: number, noise: number): boolean {
    const [bLow, bHigh] = capacityRange(first, rHigh, noise, this.firstCapRefuted ? this.mostPassed() : 0);
    if (bLow > bHigh) return false;
    const cycles = this.current ? [...this.closed, this.current] : this.closed;
    const passesAll = (cap: number) => cycles.every((c) => everyPassHadToken(c.passes, c.startAt, c.truncated ? cap : 1 + noise, rHigh, cap, 1 - noise));
    if (!passesAll(bHigh)) return false;
    const a = passesAll(bLow) ? bLow : bisectCapacity(bLow, bHigh, passesAll)[1];
    return this.closed.every((c) => levelAt(c.taken, c.startAt, c.closedAt!, rLow, a) <= 1 + noise);
  }

  /**
   * The most requests any segment kept took (the first's before its 429, each cycle's): with the first
   * segment's bound refuted, the capacity's bound from above. A bucket that held more than a cycle then
   * took never had that much in it during the cycle (it closed under one token), so no capacity above
   * it replays the cycles differently.
   */
  private mostPassed(): number {
    const cycles = this.current ? [...this.closed, this.current] : this.closed;
    return Math.max(this.first?.before ?? 0, ...cycles.map((c) => c.taken.length));
  }

  /** Send times of requests sent before `at` and not answered yet. */
  private pendingBefore(at: number): number[] {
    const out: number[] = [];
    for (const [t, n] of this.outstanding) if (t < at) for (let i = 0; i < n; i++) out.push(t);
    return out;
  }
}

/** The most of `times` (ascending) within `ms` of one another. */
function mostWithin(times: readonly number[], ms: number): number {
  let most = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i]! - times[j]! > ms) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** Drop the oldest half of a cycle's passes (and what it took before them); it starts at the cut. */
function truncate(c: Cycle): void {
  // Answers come back out of send order: the cut is the median send time.
  const cut = [...c.passes].sort((a, b) => a - b)[c.passes.length >> 1]!;
  c.passes = c.passes.filter((t) => t >= cut);
  c.taken = c.taken.filter((t) => t >= cut);
  c.startAt = cut;
  c.truncated = true;
}

/**
 * The capacities the first segment allows at rate `r`. At least the least capacity under which
 * every pass found a token in a bucket that began full, replayed with the cap: a run's first
 * requests go out one or two at a time (the workspace check, the first list page: 13 passes over
 * 120 ms from a cold process), the bucket stays full meanwhile and what it refills then overflows.
 * Counted without the cap, a 40/s burst-10 bucket's first segment allowed a capacity of 1 at
 * 104 req/s. (A bucket that began less than full passed fewer, so this holds for it too.) At most
 * what went out before the closing 429, and a little: a bound from the close's level would need
 * the bucket full at the start, and a bucket half full then read as half the capacity and the
 * quota as 30% faster than it was (harness, 200/s burst 20 with 10 tokens at the start: 1.31 -> 1.61).
 */
function capacityRange(first: FirstSegment, r: number, noise: number, refutedMost = 0): [number, number] {
  const most = Math.max(first.before, refutedMost) + OVERTAKEN + 1 + noise;
  const everyPassFound = (cap: number) => everyPassHadToken(first.passes, first.startAt, cap, r, cap, 1 - noise);
  if (!everyPassFound(most)) return [most, 1];
  if (everyPassFound(1)) return [1, most];
  // More capacity, more tokens at every send: the test is monotonic in it.
  return [bisectCapacity(1, most, everyPassFound)[0], most];
}

/**
 * Capacities `a` < `b` with `holds` false at `a` and true at `b`, CAPACITY_STEPS halvings into [from, to]
 * (`holds` false at `from`, true at `to`, and monotonic: false below some capacity, true from it).
 */
function bisectCapacity(from: number, to: number, holds: (cap: number) => boolean): [number, number] {
  let a = from;
  let b = to;
  for (let i = 0; i < CAPACITY_STEPS; i++) {
    const m = (a + b) / 2;
    if (holds(m)) b = m;
    else a = m;
  }
  return [a, b];
}

/** True when every pass (ascending send times) found at least `need` tokens, starting with `start` at `startAt`. */
function everyPassHadToken(passes: readonly number[], startAt: number, start: number, r: number, cap: number, need: number): boolean {
  let tokens = Math.min(cap, start);
  let last = startAt;
  for (const t of passes) {
    tokens = Math.min(cap, tokens + (r * (t - last)) / 1000);
    if (tokens < need) return false;
    tokens -= 1;
    last = t;
  }
  return true;
}

/** Tokens at `endAt`, starting empty at `startAt`, one taken per send in `taken` (ascending): the fewest the bucket could hold. */
function levelAt(taken: readonly number[], startAt: number, endAt: number, r: number, cap: number): number {
  let tokens = 0;
  let last = startAt;
  for (const t of taken) {
    tokens = Math.min(cap, tokens + (r * (t - last)) / 1000) - 1;
    last = t;
  }
  return Math.min(cap, tokens + (r * (endAt - last)) / 1000);
}
