/**
 * What the server's quota is, learned from what it did: every answered request is an
 * observation (it passed, or it was throttled with a 429), stamped at its estimated arrival
 * at the server (the middle of its round trip, give or take how far that round trip strays
 * from the typical one).
 *
 * The model is a token bucket (rate r, capacity B), the shape most quotas have; a fixed
 * window looks to it like a bucket whose capacity is the window's allowance. For each
 * candidate B, the rates consistent with the observations form an interval: a higher rate
 * only adds tokens, so "every pass had a token" holds above some rate lo(B) and "every 429
 * found the bucket empty" holds below some hi(B). Both are found by bisection over a replay
 * of the observations:
 * - passes are checked on an upper envelope of the bucket (full at the first observation,
 *   at most 1 token right after a 429), so lo(B) is a true lower bound;
 * - 429s are checked on a lower envelope (empty at the first 429, never refilled by
 *   anything but time), so hi(B) is a true upper bound.
 * The fit is the union over the candidates B whose interval is not empty. It never
 * assumes a value: a rate is only excluded when some observation contradicts it, which is
 * why a one-second Retry-After pause (in which a small bucket refills and then overflows)
 * no longer reads as "the server accepts only what it answered in that second".
 */

export interface QuotaFit {
  /** Lowest rate (req/s) consistent with every observation, over all feasible capacities. */
  low: number;
  /** Highest consistent rate; Infinity while no 429 bounds it. */
  high: number;
  /** Smallest and largest feasible bucket capacity. */
  burstLow: number;
  burstHigh: number;
}

interface Observation {
  /** Estimated arrival at the server (ms, our clock). */
  t: number;
  /** How wrong t may be, relative to the other observations' t. */
  slackMs: number;
  passed: boolean;
}

/** Bounds of the bisection (req/s). 0.05 req/s is one request in 20 s; 20k/s is beyond any API quota. */
const MIN_RATE = 0.05;
const MAX_RATE = 20_000;
/** Relative precision of the bisection: a bound may be off by this share. */
export const FIT_PRECISION = 0.002;
const PRECISION = FIT_PRECISION;
/** Observations kept: half a minute is many bucket periods, and bounds the cost of a fit. */
const HORIZON_MS = 30_000;
const MAX_OBSERVATIONS = 3_000;
/** Every capacity up to 64, then a 10% ladder (fits are relative; big buckets need no exact B). */
const BURST_CANDIDATES: number[] = (() => {
  const out: number[] = [];
  for (let b = 1; b <= 64; b++) out.push(b);
  for (let b = 64 * 1.1; b <= 100_000; b *= 1.1) out.push(Math.round(b));
  return out;
})();

export class QuotaEstimator {
  private obs: Observation[] = [];
  private throttles = 0;

  /** `typicalRttMs`: the median round trip; what matters is how far this one strays from it. */
  passed(sentAt: number, answeredAt: number, typicalRttMs: number): void {
    this.add(sentAt, answeredAt, typicalRttMs, true);
  }
  throttled(sentAt: number, answeredAt: number, typicalRttMs: number): void {
    this.add(sentAt, answeredAt, typicalRttMs, false);
    this.throttles++;
  }
  get hasThrottles(): boolean {
    return this.throttles > 0;
  }
  /** Forget everything before `t` (the quota changed shape: the old observations contradict the new). */
  forgetBefore(t: number): void {
    this.obs = this.obs.filter((o) => o.t >= t);
    this.throttles = this.obs.filter((o) => !o.passed).length;
  }

  /** The capacities and rates consistent with what was seen; null before the first 429 or when none fits. */
  fit(): QuotaFit | null {
    if (!this.obs.some((o) => !o.passed)) return null;
    const obs = this.obs;
    const firstThrottle = obs.findIndex((o) => !o.passed);
    let fit: QuotaFit | null = null;
    for (const b of BURST_CANDIDATES) {
      const lo = bisect((r) => passesHold(obs, r, b), true);
      const hi = bisect((r) => throttlesHold(obs, firstThrottle, r, b), false);
      if (lo > hi * (1 + PRECISION)) continue;
      if (!fit) fit = { low: lo, high: hi, burstLow: b, burstHigh: b };
      else {
        fit.low = Math.min(fit.low, lo);
        fit.high = Math.max(fit.high, hi);
        fit.burstHigh = b;
      }
    }
    return fit;
  }

  private add(sentAt: number, answeredAt: number, typicalRttMs: number, passed: boolean): void {
    const rtt = Math.max(0, answeredAt - sentAt);
    // Stamped at the middle of the round trip. A latency every request shares shifts every
    // stamp alike and cancels out of any rate; only this request's deviation from the typical
    // round trip (and the clock's millisecond) makes its stamp uncertain relative to the others.
    const o: Observation = { t: sentAt + rtt / 2, slackMs: 2 + Math.abs(rtt - typicalRttMs), passed };
    // Answers arrive out of order; keep the list sorted by arrival (insertion from the end is cheap).
    let i = this.obs.length;
    while (i > 0 && this.obs[i - 1]!.t > o.t) i--;
    this.obs.splice(i, 0, o);
    const cut = o.t - HORIZON_MS;
    let drop = 0;
    while (drop < this.obs.length && (this.obs.length - drop > MAX_OBSERVATIONS || this.obs[drop]!.t < cut)) drop++;
    if (drop > 0) {
      const gone = this.obs.splice(0, drop);
      this.throttles -= gone.filter((g) => !g.passed).length;
    }
  }
}

/**
 * Smallest rate where `holds` is true (`increasing`: holds above it), or the largest where
 * it is true (decreasing: holds below it); bisection in log space. Returns MIN_RATE / MAX_RATE
 * (or Infinity) at the edges.
 */
function bisect(holds: (r: number) => boolean, increasing: boolean): number {
  if (increasing) {
    if (holds(MIN_RATE)) return MIN_RATE;
    if (!holds(MAX_RATE)) return Infinity;
  } else {
    if (holds(MAX_RATE)) return Infinity;
    if (!holds(MIN_RATE)) return 0;
  }
  let a = MIN_RATE;
  let b = MAX_RATE;
  while (b / a > 1 + PRECISION) {
    const m = Math.sqrt(a * b);
    if (holds(m) === increasing) b = m;
    else a = m;
  }
  return increasing ? b : a;
}

/** Upper envelope: did every pass find a token? */
function passesHold(obs: Observation[], rate: number, cap: number): boolean {
  const perMs = rate / 1000;
  let tokens = cap;
  let last = obs[0]!.t;
  for (const o of obs) {
    // Evaluated at the latest the request may have arrived: the most tokens it may have found.
    const at = Math.max(last, o.t + o.slackMs);
    tokens = Math.min(cap, tokens + (at - last) * perMs);
    last = at;
    if (o.passed) {
      if (tokens < 1 - 1e-9) return false;
      tokens = Math.max(0, tokens - 1);
    } else {
      tokens = Math.min(tokens, 1);
    }
  }
  return true;
}

/** Lower envelope from the first 429: did every 429 find the bucket empty? */
function throttlesHold(obs: Observation[], from: number, rate: number, cap: number): boolean {
  const perMs = rate / 1000;
  let tokens = 0;
  let last = obs[from]!.t - obs[from]!.slackMs;
  for (let i = from + 1; i < obs.length; i++) {
    const o = obs[i]!;
    // Evaluated at the earliest the request may have arrived (not before the one before it):
    // the fewest tokens it may have found.
    const at = Math.max(last, o.t - o.slackMs);
    tokens = Math.min(cap, tokens + (at - last) * perMs);
    last = at;
    if (o.passed) tokens = Math.max(0, tokens - 1);
    else if (tokens >= 1) return false;
  }
  return true;
}
