/**
 * Fitting a token bucket (rate r, capacity B) to whole segments of what the server did.
 *
 * A segment runs from one moment the server's bucket was known empty (the send time of a 429
 * episode's earliest 429) to the next, or from the run's first request (bucket assumed full)
 * to the first 429. Along it we know every request we sent that consumed a token (passed, or
 * was answered 503 after the quota). For a candidate (r, B) the bucket is replayed over those
 * send times (refill at r, capped at B, one token per request); at the segment's end it must
 * hold less than one token, because the server refused. The residual is that final level less
 * half a token, and the fit is the (r, B) with the least sum of squared residuals.
 *
 * Why whole segments and not single requests: on a loaded machine a send time is off by tens
 * of milliseconds, which at 100 req/s is several tokens for one request; over a segment of
 * seconds the same error is a fraction of a token. The replay includes pauses (the bucket
 * refills and overflows at B during a Retry-After), ramps and holds alike, so no phase needs a
 * formula of its own.
 */

/** What the bucket holds at a 429: between 0 and 1 token; we take the middle. */
const TOKENS_AT_REFUSAL = 0.5;
/**
 * The run's first segment is a burst sent as fast as the in-flight limit allows: its 429 came
 * as the bucket ran out, nearer none than half a token left.
 */
const FIRST_END_RESIDUAL = 0.2 - TOKENS_AT_REFUSAL;
/** Search range for the rate (req/s) and the capacity (tokens). */
const RATE_RANGE: [number, number] = [0.05, 5_000];
const BURST_RANGE: [number, number] = [1, 100_000];
export interface Segment {
  /** Epoch ms the segment starts: the previous refusal, or the run's first request. */
  startAt: number;
  /** True for the run's first segment: the bucket is taken as full at its start. */
  fromFull: boolean;
  /** Send times (epoch ms, ascending) of the requests in it that consumed a token. */
  consumed: number[];
  /** Send times (ascending) of requests that may or may not have (503s: a server may answer them before or after the quota). */
  uncertain?: number[];
  /** Send time of the request whose refusal ends it. */
  endAt: number;
}

export interface BucketFit {
  rate: number;
  burst: number;
  /**
   * How long the rate was measured: the root of the summed squares of the seconds the replayed
   * bucket spent below capacity in each segment after the first (a residual moves by rate ×
   * that time per unit of rate, so an error of one token is 1 / that in req/s).
   */
  measuredS: number;
}

/**
 * The bucket's level at the segment's end, less what a refusal implies (0.5 token). `share`:
 * what each uncertain request is taken to have cost (0 to 1 token).
 */
export function residual(seg: Segment, rate: number, burst: number, share = 1): number {
  let tokens = seg.fromFull ? burst : TOKENS_AT_REFUSAL;
  let last = seg.startAt;
  for (const [t, cost] of costs(seg, share)) {
    tokens = Math.min(burst, tokens + (rate * (t - last)) / 1000) - cost;
    last = t;
  }
  tokens = Math.min(burst, tokens + (rate * (seg.endAt - last)) / 1000);
  return tokens - TOKENS_AT_REFUSAL;
}

/** The segment's sends in time order with what each cost: 1, or `share` for an uncertain one. */
function costs(seg: Segment, share: number): Array<[number, number]> {
  const u = seg.uncertain ?? [];
  if (!u.length) return seg.consumed.map((t) => [t, 1]);
  const all: Array<[number, number]> = [...seg.consumed.map((t): [number, number] => [t, 1]), ...u.map((t): [number, number] => [t, share])];
  return all.sort((a, b) => a[0] - b[0]);
}

/** Seconds the replayed bucket spent below capacity: the time over which the rate shows. */
export function timeBelowCapacityS(seg: Segment, rate: number, burst: number): number {
  let tokens = seg.fromFull ? burst : TOKENS_AT_REFUSAL;
  let last = seg.startAt;
  let below = 0;
  const advance = (to: number) => {
    const dt = (to - last) / 1000;
    const toFull = Math.max(0, (burst - tokens) / rate);
    below += Math.min(dt, toFull);
    tokens = Math.min(burst, tokens + rate * dt);
    last = to;
  };
  for (const [t, cost] of costs(seg, 1)) {
    advance(t);
    tokens -= cost;
  }
  advance(seg.endAt);
  return below;
}

/** Bisection steps on a log scale: 30 narrow a factor of 4e5 to within 1.2e-8 of it. */
const BISECTION_STEPS = 30;

/**
 * The least x in [lo, hi] (log scale) with f(x) ≥ target, for f non-decreasing: lo if f(lo)
 * already is, hi if even f(hi) is not.
 */
function solveUp(f: (x: number) => number, target: number, [lo, hi]: [number, number]): number {
  if (f(lo) >= target) return lo;
  if (f(hi) < target) return hi;
  let a = Math.log(lo);
  let b = Math.log(hi);
  for (let i = 0; i < BISECTION_STEPS; i++) {
    const m = (a + b) / 2;
    if (f(Math.exp(m)) >= target) b = m;
    else a = m;
  }
  return Math.exp((a + b) / 2);
}

/** What one segment says of the rate, the capacity given: its best value and the range within `noise` tokens. */
interface RateReading {
  mid: number;
  low: number;
  high: number;
}

function readRate(seg: Segment, burst: number, noise: number, share: number): RateReading {
  // A residual rises with the rate; where it is flat (the bucket full), a range of rates fits alike.
  const at = (target: number) => solveUp((r) => residual(seg, r, burst, share), target, RATE_RANGE);
  return { mid: at(0), low: at(-noise), high: at(noise) };
}

/**
 * Combine the segments' readings: at the mean of their best values weighted by how narrow
 * each is, inside the range every one of them allows. Readings that contradict each other (a
 * busy machine bunched requests, the quota changed, or is not a bucket) leave the weighted
 * mean, with a range that spans them all.
 */
function combine(readings: RateReading[]): RateReading {
  let low = Math.max(...readings.map((r) => r.low));
  let high = Math.min(...readings.map((r) => r.high));
  if (low > high) {
    low = Math.min(...readings.map((r) => r.low));
    high = Math.max(...readings.map((r) => r.high));
  }
  let sw = 0;
  let swx = 0;
  for (const r of readings) {
    const w = 1 / Math.max(1e-9, Math.log(r.high / r.low)) ** 2;
    sw += w;
    swx += w * Math.log(r.mid);
  }
  const mid = Math.exp(swx / sw);
  return { mid: Math.min(high, Math.max(low, mid)), low, high };
}

/** Capacities tried around the fitted one when the first segment leaves it uncertain. */
const BURST_PROFILE_POINTS = 12;
const BURST_PROFILE_SPAN = 4;

/**
 * The range of rates, widened by what the capacity leaves open. A first segment that lasted a
 * while (a slow start, a busy machine) shows burst + rate × its length, not the burst alone,
 * and a later segment read with a burst too large or too small reads the rate off by as much:
 * every capacity within a factor of BURST_PROFILE_SPAN that still explains the first segment
 * (within its noise and a token) adds its own range of rates.
 */
function widenForBurst(initial: Segment, rest: Segment[], reading: RateReading, burst: number, noiseTokens: (rate: number) => number, share: number): RateReading {
  if ((reading.mid * (initial.endAt - initial.startAt)) / 1000 < 1) return reading;
  let { low, high } = reading;
  for (let i = 0; i <= BURST_PROFILE_POINTS; i++) {
    const b = Math.max(1, burst * BURST_PROFILE_SPAN ** ((2 * i) / BURST_PROFILE_POINTS - 1));
    const r = combine(rest.map((seg) => readRate(seg, b, noiseTokens(reading.mid), share)));
    const off = residual(initial, r.mid, b, share) - FIRST_END_RESIDUAL;
    if (Math.abs(off) > noiseTokens(r.mid) + 1) continue;
    low = Math.min(low, r.low);
    high = Math.max(high, r.high);
  }
  return { mid: reading.mid, low, high };
}

/** The rate the later segments read at capacity `b`: their zero crossings, averaged in ratio, weighted by their length. */
function quickRate(rest: Segment[], b: number, share: number): number {
  let sw = 0;
  let swx = 0;
  for (const seg of rest) {
    // At this capacity no rate explains the segment (it passed more than the bucket can hold
    // after its pause): the capacity is too small.
    if (residual(seg, RATE_RANGE[1], b, share) < 0) return Number.NaN;
    const w = Math.max(1, seg.endAt - seg.startAt);
    sw += w;
    swx += w * Math.log(solveUp((r) => residual(seg, r, b, share), 0, RATE_RANGE));
  }
  return Math.exp(swx / sw);
}

/** Capacities tried from the top down for the one that explains the first segment. */
const BURST_SCAN_POINTS = 16;

/**
 * The capacity at which the rate the later segments read also explains the first one. Two
 * explanations can fit: the real one, and a degenerate one with a bucket of about one token
 * and a rate fast enough to pass a burst whose requests a busy machine spread over a tenth of
 * a second. The largest capacity that fits is the real one (and the cautious one): scan from
 * the top, then bisect between the last two points.
 */
function burstExplainingFirst(initial: Segment, rest: Segment[], share: number, burstHi: number): number {
  const h = (b: number) => {
    const r = quickRate(rest, b, share);
    return Number.isNaN(r) ? Infinity : residual(initial, r, b, share) - FIRST_END_RESIDUAL;
  };
  let above = burstHi;
  let best = { b: burstHi, off: Math.abs(h(burstHi)) };
  for (let i = 1; i <= BURST_SCAN_POINTS; i++) {
    const b = burstHi ** (1 - i / BURST_SCAN_POINTS);
    const off = h(b);
    if (Math.abs(off) < best.off) best = { b, off: Math.abs(off) };
    if (off <= 0) return clamp(solveUp(h, 0, [b, above]), BURST_RANGE);
    above = b;
  }
  return best.b;
}

/**
 * The (rate, burst) that explains the segments, with the range of rates that explain them
 * within `noiseTokens(rate)` each. The first segment (from a full bucket) shows the capacity;
 * each later one, the capacity given, pins the rate where its residual crosses zero (a
 * residual only rises with the rate, so bisection finds it whatever the shape of the rest).
 */
export function fitBucket(segments: Segment[], noiseTokens: (rate: number) => number, share = 1): BucketFit & { low: number; high: number; sse: number } {
  const initial = segments.find((s) => s.fromFull);
  const rest = segments.filter((s) => !s.fromFull);
  const burstHi = clamp(4 * Math.max(1, ...segments.map((s) => s.consumed.length)) + 8, BURST_RANGE);
  // The noise is a few tokens either way; its dependence on the rate is taken from a first read.
  const first = rest.length ? combine(rest.map((seg) => readRate(seg, initial?.consumed.length ?? 1, noiseTokens(1), share))) : null;
  const noise = noiseTokens(first?.mid ?? 1);
  const rateAt = (b: number) => combine(rest.map((seg) => readRate(seg, b, noise, share)));
  let burst = clamp(initial ? initial.consumed.length : Math.max(1, ...rest.map((s) => s.consumed.length)), BURST_RANGE);
  if (initial && rest.length) burst = burstExplainingFirst(initial, rest, share, burstHi);
  let reading: RateReading = rest.length ? rateAt(burst) : { mid: 1, low: RATE_RANGE[0], high: RATE_RANGE[1] };
  if (initial && rest.length) reading = widenForBurst(initial, rest, reading, burst, noiseTokens, share);
  const measuredS = Math.sqrt(rest.reduce((acc, s) => acc + timeBelowCapacityS(s, reading.mid, burst) ** 2, 0));
  const sse = segments.reduce((acc, s) => acc + residual(s, reading.mid, burst, share) ** 2, 0);
  return { rate: reading.mid, burst, measuredS, low: reading.low, high: reading.high, sse };
}

function clamp(x: number, [lo, hi]: [number, number]): number {
  return Math.min(hi, Math.max(lo, Number.isFinite(x) ? x : lo));
}
