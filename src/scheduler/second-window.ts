/**
 * Is the quota N requests per second, a counter per second (a fixed window of one second) or a log
 * of the last second, rather than a token bucket? Their 429s name a wait of 1 s, as a bucket's do,
 * and replayed as a bucket they mislead both ways: counts over a span that crosses a second's start
 * see two allowances (100 per second proved a rate of 126-133 req/s, and each hold above 100 drew a
 * 429), and a first burst that crossed one held the run at 72 (harness, docs/server-variance.md).
 *
 * The test, over the send times of passes and of each 429 episode's first refusal:
 * - fixed: for some phase, no window of one second passed more than N, and every window that held
 *   a refusal had passed N (less TOLERANCE);
 * - or sliding: no second passed more than N, and the second before each refusal passed N.
 * And it must tell such a quota from a bucket probed just above its rate, whose every second also
 * passes about what it refuses at: REFUSED_WINDOWS windows (or more, as the caller asks) were refused,
 * one of them passed its N within FAST_SHARE of a second (a burst a bucket of less than N would not
 * pass), and two of them over spans SPREAD_REQUESTS apart (a bucket's count grows with the span).
 * The smallest N that fits is the answer: sent evenly at under N per second, no second of either
 * kind holds more than N.
 */

/** Refused windows (429 episodes) that must agree before N is believed. */
const REFUSED_WINDOWS = 2;
/** A refused window may have passed this many under N: a request overtaken on the way, one on a window's edge. */
const TOLERANCE = 2;
/** ...and one of them passed its N within this share of a second (a window admits its allowance at once). */
const FAST_SHARE = 0.6;
/**
 * ...and two refused windows reached their N over spans so far apart that N per second over the
 * difference is this many requests: a bucket's count grows with the span (by its rate, about N, times
 * the difference: well beyond TOLERANCE), a window's does not.
 */
const SPREAD_REQUESTS = 5;
/** Phases tried (ms): finer than the jitter of send times against the server's clock gains nothing. */
const PHASE_STEP_MS = 5;
/** Events older than this (ms before the newest) are dropped: the quota of the last half minute. */
const KEEP_MS = 30_000;
/** At least this many per second: below, a bucket's whole-second pauses and a window's look alike. */
const MIN_ALLOWANCE = 10;
/** ...in steps of this (ms). */
const TRIM_EVERY_MS = 5_000;
const SECOND_MS = 1_000;

export class SecondWindow {
  private passes: number[] = [];
  private refusals: number[] = [];
  private ruledOut = false;

  passed(at: number): void {
    if (this.ruledOut) return;
    this.passes.push(at);
    this.trim(at);
  }

  /** The first refusal of a 429 episode, sent at `at`, naming a wait of `waitMs` (null: none). */
  refused(at: number, waitMs: number | null): void {
    if (this.ruledOut) return;
    // A wait of more than a second is no counter per second's; a missing one the test cannot read.
    if (waitMs === null || waitMs > SECOND_MS) return this.ruleOut();
    // A refusal before anything passed (a quota another client had used up) says nothing of N.
    if (this.passes.length === 0) return;
    this.refusals.push(at);
  }

  /** A 429 came while sent evenly under the N it fitted: no such quota, for the rest of the run. */
  ruleOut(): void {
    this.ruledOut = true;
    this.passes = [];
    this.refusals = [];
  }

  /** The allowance per second the evidence fits with at least `refused` windows refused (REFUSED_WINDOWS), or null when it does not fit such a quota. */
  allowance(refused = REFUSED_WINDOWS): number | null {
    if (this.ruledOut || this.refusals.length < refused) return null;
    const passes = [...this.passes].sort((a, b) => a - b);
    const refusals = [...this.refusals].sort((a, b) => a - b);
    const fits = [fixedFit(passes, refusals, refused), slidingFit(passes, refusals)].filter((n): n is number => n !== null);
    return fits.length ? Math.min(...fits) : null;
  }

  /** Drops what is older than KEEP_MS, a few seconds at a time (not at each pass: that made each pass cost the whole list). */
  private trim(now: number): void {
    const from = now - KEEP_MS;
    if (!(this.passes[0]! < from - TRIM_EVERY_MS)) return;
    if (this.passes[0]! < from) this.passes = this.passes.filter((t) => t >= from);
    if (this.refusals.length && this.refusals[0]! < from) this.refusals = this.refusals.filter((t) => t >= from);
  }
}

/**
 * The least N over the phases at which fixed windows of a second fit (see above), or null. Told from a
 * bucket at that N only: a phase that puts more in a window stretches its spans too, and let a bucket pass.
 */
function fixedFit(passes: number[], refusals: number[], refused: number): number | null {
  let best: number | null = null;
  let unlike = false;
  for (let phase = 0; phase < SECOND_MS; phase += PHASE_STEP_MS) {
    const perWindow = new Map<number, number[]>();
    for (const t of passes) {
      const w = Math.floor((t - phase) / SECOND_MS);
      const list = perWindow.get(w);
      if (list) list.push(t);
      else perWindow.set(w, [t]);
    }
    let n = 0;
    for (const list of perWindow.values()) n = Math.max(n, list.length);
    if (n < MIN_ALLOWANCE || (best !== null && n > best)) continue;
    const windows = new Set<number>();
    const spans: number[] = [];
    let fits = true;
    for (const r of refusals) {
      const w = Math.floor((r - phase) / SECOND_MS);
      const before = (perWindow.get(w) ?? []).filter((t) => t <= r);
      const all = perWindow.get(w)?.length ?? 0;
      if (all < n - TOLERANCE) {
        fits = false;
        break;
      }
      windows.add(w);
      if (before.length) spans.push(before.at(-1)! - before[0]!);
    }
    if (!fits || windows.size < refused) continue;
    if (best !== n) unlike = false;
    best = n;
    unlike ||= unlikeBucket(spans, n);
  }
  return unlike ? best : null;
}

/** N when a log of the last second fits (see above), or null. */
function slidingFit(passes: number[], refusals: number[]): number | null {
  let n = 0;
  let from = 0;
  for (let i = 0; i < passes.length; i++) {
    while (passes[i]! - passes[from]! >= SECOND_MS) from++;
    n = Math.max(n, i - from + 1);
  }
  if (n < MIN_ALLOWANCE) return null;
  const spans: number[] = [];
  for (const r of refusals) {
    const inSecond = passes.filter((t) => t > r - SECOND_MS && t <= r);
    if (inSecond.length < n - TOLERANCE) return null;
    spans.push(inSecond.at(-1)! - inSecond[0]!);
  }
  return unlikeBucket(spans, n) ? n : null;
}

/** Refused windows' spans (ms) a bucket would not have passed `n` over each: one fast, two far apart. */
function unlikeBucket(spans: number[], n: number): boolean {
  if (spans.length < REFUSED_WINDOWS) return false;
  const least = Math.min(...spans);
  return least <= FAST_SHARE * SECOND_MS && ((Math.max(...spans) - least) / SECOND_MS) * n >= SPREAD_REQUESTS;
}
