/**
 * The send rate, learned by fitting a token bucket to whole segments between 429s
 * (quota-fit.ts). After TCP (slow start, then congestion avoidance around a measured point)
 * and the AWS SDK's adaptive mode (recover toward the rate that was last throttled), with the
 * quota's rate measured over seconds of counts instead of read off one burst:
 * - unpaced: until the first 429 nothing is known; what passed before it shows the burst.
 * - ramp: from what the server accepted over the last second, doubling every RAMP_DOUBLING_MS,
 *   until a 429 ends the segment that first measures the rate (the server's bucket refills
 *   while we send below its rate and drains once we pass it).
 * - verify: the fit is not tight yet. Send a little above it, so that the server's bucket
 *   drains over a few seconds (VERIFY_DRAIN_S), and let the 429 that ends the drain measure
 *   the rate again over that longer span. Nothing is lost above the rate: the bucket's tokens
 *   are being used. Should no 429 come, the rate is higher than fitted: step up.
 * - hold: the fit is tight. Send just below it, by its uncertainty (at least HOLD_MARGIN_MIN).
 *   A 429 in hold refits with the long segment it ends (the most precise there is) and widens
 *   the margin for next time.
 * The pacer's capacity is the fitted burst less one, so what a pause refilled is used at once,
 * except in verify, where the drain itself is the measurement.
 *
 * A fixed window looks to the fit like a bucket of its allowance refilling at allowance ÷
 * window: holding just below that rate spreads each window's allowance over the window.
 */
import { fitBucket, type Segment } from "./quota-fit.js";

/** The ramp doubles in this time: fast enough to cross 2–200 req/s in about two seconds, slow enough that the drain after crossing spans a few tenths of a second. */
const RAMP_DOUBLING_MS = 300;
/** The ramp's rate is raised at most this often (each raise reconfigures the pacer). */
const RAMP_STEP_MS = 50;
/** In verify, the server's bucket should drain in about this long: long enough to measure the rate to ~1 %, short enough to be over early in a run. */
const VERIFY_DRAIN_S = 3;
/** ...by sending this much above the fitted rate at least (and at most). */
const VERIFY_OVER_MIN = 0.03;
const VERIFY_OVER_MAX = 0.3;
/** No 429 after this many expected drain times (at least VERIFY_WAIT_MIN_MS): the rate is above the fit, step up. */
const VERIFY_PATIENCE = 3;
const VERIFY_WAIT_MIN_MS = 2_000;
/** ...and at most this: a fit whose burst is far too large would otherwise keep us below the rate for minutes. */
const VERIFY_WAIT_MAX_MS = 5_000;
/**
 * Verify only while 429s stay under this share of requests (the bound is 2 %), once the
 * run is past its first few episodes (the first 429, the ramp's, a verify or two: every run
 * needs those, and a long run pays for them).
 */
const VERIFY_429_SHARE = 0.015;
const VERIFY_FREE_EPISODES = 4;
/** A fit whose upper end reaches this (req/s) has nothing above it: the search range's top, halved. */
const UNBOUNDED_RATE = 2_500;
/** While the fit's rates span more than this (high ÷ low), verify bisects the span. */
const VERIFY_BISECT_SPAN = 1.3;
/**
 * A named wait longer than this is no token bucket's (one token of a bucket at 0.5 req/s, the
 * slowest we expect, is 2 s): the quota counts requests per window, and a bucket's verify
 * would only run each window dry early.
 */
const WINDOW_WAIT_MS = 2_500;
/** A fit whose rates span this little (high ÷ low − 1) is held; a wider one is verified. */
const HOLD_SPREAD = 0.03;
/** In hold, below the fit by this (and never above its low end): timers and clocks are not exact. */
const HOLD_MARGIN_MIN = 0.006;
/** Each 429 in hold widens the margin by this factor, up to HOLD_MARGIN_MAX (noise or a drifting quota). */
const HOLD_MARGIN_GROWTH = 1.5;
const HOLD_MARGIN_MAX = 0.05;
/**
 * What blurs a segment's ends, in tokens: the refusal's half token, plus the rate times how far
 * a send time may be from when the server saw it (jitter, a busy event loop).
 */
const EDGE_NOISE_TOKENS = 0.5;
const EDGE_NOISE_MS = 15;
/** The fit uses the run's first segment and this many recent ones (a quota may change). */
const FIT_SEGMENTS = 6;
/** A rate counts as really sent (not starved for work) when this share of its requests went out. */
const SENT_SHARE = 0.8;
/** The share of a token a late timer may carry over (pacer.ts), when the server's bucket holds two or more. */
const PACER_CARRY = 0.9;
/** Below this rate a millisecond is under 5% of a token interval: nothing worth the risk of a pair. */
const CARRY_FROM_RATE = 50;
/**
 * After a pause the pacer sends what the server's bucket refilled, less this much of the rate:
 * right after, the server's bucket is nearly empty and refills only by our margin, so requests
 * that a stall bunched together would draw 429s with nothing in reserve.
 */
const RESERVE_MS = 30;
/** Never below: one request every 2 s still makes progress and keeps learning. */
const MIN_RATE = 0.5;

export type RatePhase = "unpaced" | "ramp" | "verify" | "hold";

export interface RateSetting {
  rate: number | null;
  /** Pacer capacity: tokens it may hold after a pause. */
  burst: number;
  /** The pacer may carry a fraction of a token above `burst` (the server's bucket holds more than one). */
  carry: number;
  phase: RatePhase;
}

/** The quota as fitted: rate (req/s) and burst. */
export interface QuotaEstimate {
  rate: number | null;
  burst: number | null;
  /** The range of rates that explain what was seen. */
  low: number | null;
  high: number | null;
}

/** How an attempt ended, as far as the quota is concerned. */
export type SendOutcome = "consumed" | "uncertain" | "refused" | "free";

interface LoggedSend {
  seq: number;
  at: number;
  outcome: "pending" | SendOutcome;
}

/** The quota as fitted: rate and burst, and the range of rates that explain what was seen. */
interface Fit {
  rate: number;
  burst: number;
  low: number;
  high: number;
}

/** What blurs a segment's ends, in tokens, at `rate`. */
function edgeNoise(rate: number): number {
  return EDGE_NOISE_TOKENS + (rate * EDGE_NOISE_MS) / 1000;
}

interface Refusal {
  seq: number;
  at: number;
}

export class RateControl {
  private setting: RateSetting = { rate: null, burst: 1, carry: 0, phase: "unpaced" };
  /** Every send since the oldest segment the fit still uses, in grant order. */
  private log: LoggedSend[] = [];
  private seq = 0;
  private first: LoggedSend | null = null;
  /**
   * The first 429 read in each episode: the moments the server's bucket was empty. (Not the
   * earliest sent: a request that a busy machine held back may be sent early, arrive late and
   * be refused long after requests sent behind it passed.)
   */
  private readonly refusals: Refusal[] = [];
  /** The run's first segment, frozen at the first fit (it alone shows the burst). */
  private initial: Segment | null = null;
  /** A fit is due once every request sent before the last refusal has its answer. */
  private fitOwed = false;
  private pendingBeforeRefusal = 0;
  private fit: Fit | null = null;
  private margin = HOLD_MARGIN_MIN;
  /** A 429 named a wait longer than a bucket's token: the quota counts per window. */
  private windowed = false;
  /** The moment each refusal's named wait ends (null: none named); a window's end, for a window. */
  private readonly deadlines: Array<number | null> = [];
  /** Requests answered 429, for the share of them (VERIFY_429_SHARE). */
  private refused = 0;
  private sends = 0;
  private phaseAt = 0;
  private sendsAtPhase = 0;
  private stepAt = 0;
  private sendsAtStep = 0;

  get current(): RateSetting {
    return this.setting;
  }

  get estimate(): QuotaEstimate {
    const f = this.fit;
    return { rate: f?.rate ?? null, burst: f?.burst ?? null, low: f?.low ?? null, high: f?.high ?? null };
  }

  /** A request went out (granted) at `now`. */
  sent(now: number): void {
    const entry: LoggedSend = { seq: this.seq++, at: now, outcome: "pending" };
    this.log.push(entry);
    this.first ??= entry;
    this.sends++;
  }

  /** The attempt sent at `sentAt` ended: it consumed a token, was refused (429), or says nothing (an error before the quota). */
  ended(sentAt: number, outcome: SendOutcome): void {
    const entry = this.pendingAt(sentAt);
    if (!entry) return;
    entry.outcome = outcome;
    if (outcome === "refused") this.refused++;
    const last = this.refusals.at(-1);
    if (last && this.fitOwed && entry.seq < last.seq) this.pendingBeforeRefusal--;
  }

  /**
   * A new 429 episode began with the 429 of the request sent at `sentAt`. `accepted`: the rate
   * the server accepted over the last second (req/s), where a ramp starts.
   */
  throttled(sentAt: number, now: number, accepted: number, namedWaitMs: number | null = null): void {
    // Longer than one token of any bucket we expect: the quota is a window (or a wall).
    if (namedWaitMs !== null && namedWaitMs > WINDOW_WAIT_MS) this.windowed = true;
    this.deadlines.push(namedWaitMs === null ? null : now + namedWaitMs);
    // Every request sent so far belongs to the segment this refusal ends: no grant follows a 429
    // before its pause, and what was in flight then met the bucket as it ran dry.
    this.refusals.push({ seq: this.seq, at: sentAt });
    this.fitOwed = true;
    this.countPendingBeforeRefusal();
    if (this.setting.phase === "unpaced") {
      // Until the answers of the first burst are in, the burst is what has passed so far.
      // The ramp sends half of what passed at once after the pause: the first burst may have
      // included a slow start's refills, and a resend of more than the bucket holds would draw
      // the next 429 at once, measuring nothing. The other half the ramp drains as it passes the rate.
      const passed = this.log.filter((e) => e.outcome === "consumed").length;
      this.setRate(Math.max(MIN_RATE, accepted), "ramp", Math.max(1, passed / 2), now);
    }
    this.fitIfDue(now);
  }

  /**
   * Re-evaluate: the ramp's growth, verify's patience, a fit that became due. `backlog`: work
   * is waiting for the pacer (we send at the rate in force). True when the rate changed.
   */
  tick(now: number, backlog = false): boolean {
    const before = this.setting.rate;
    this.fitIfDue(now);
    const s = this.setting;
    if (s.rate !== null && s.phase === "ramp") this.grow(now, s.rate, backlog);
    else if (s.rate !== null && s.phase === "verify") this.stepUpIfNoDrain(now, s.rate);
    return this.setting.rate !== before;
  }

  /** When the rate control next wants a tick (the ramp's next step), or null. */
  wakeAt(): number | null {
    return this.setting.phase === "ramp" ? this.stepAt + RAMP_STEP_MS : null;
  }

  private grow(now: number, rate: number, backlog: boolean): void {
    const elapsed = now - this.stepAt;
    if (elapsed < RAMP_STEP_MS) return;
    // Grow only a rate we really send at: one the work holds back says nothing when it draws no 429.
    const sentEnough = backlog || this.sends - this.sendsAtStep >= SENT_SHARE * rate * (elapsed / 1000);
    this.stepAt = now;
    this.sendsAtStep = this.sends;
    if (sentEnough) this.setting = { ...this.setting, rate: rate * 2 ** (elapsed / RAMP_DOUBLING_MS) };
  }

  /** In verify, no 429 long after the bucket should have drained: the quota's rate is above ours. */
  private stepUpIfNoDrain(now: number, rate: number): void {
    const f = this.fit;
    if (!f) return;
    const waited = now - this.phaseAt;
    // Were the rate at the fit's low end, the bucket would have drained in this long.
    const expectedS = f.burst / Math.max(rate - f.low, rate * VERIFY_OVER_MIN);
    if (waited < Math.min(VERIFY_WAIT_MAX_MS, Math.max(VERIFY_WAIT_MIN_MS, VERIFY_PATIENCE * expectedS * 1000))) return;
    if (this.sends - this.sendsAtPhase < SENT_SHARE * rate * (waited / 1000)) return;
    // The bucket did not run dry in `waited` at `rate`: r > rate − B / waited.
    const low = Math.max(f.low, rate - f.burst / (waited / 1000));
    this.fit = { ...f, rate: Math.max(f.rate, low), low, high: Math.max(f.high, rate * (1 + VERIFY_OVER_MIN)) };
    this.verify(Math.max(rate * (1 + VERIFY_OVER_MIN), this.verifyRate(this.fit)), now);
  }

  private fitIfDue(now: number): void {
    if (!this.fitOwed || this.pendingBeforeRefusal > 0) return;
    this.fitOwed = false;
    if (!this.initial) {
      // The first refusal's answers are all in: the run's first segment shows the burst.
      this.initial = this.segmentOf(this.first, this.refusals[0]!, true);
      if (this.setting.phase === "ramp") this.setting = { ...this.setting, burst: Math.max(1, Math.floor(this.initial.consumed.length / 2)) };
    }
    const segments = this.segments();
    if (!segments.some((s) => !s.fromFull)) return;
    const f = (this.windowed ? this.windowFit() : null) ?? this.bucketFit(segments);
    const endedPhase = this.setting.phase;
    // What a quiet verify showed still holds unless this fit contradicts it; and no quota is
    // below what the server accepted on average since the first 429 (less a burst).
    const kept = f.low <= this.fit?.low! && this.fit!.low <= f.high ? this.fit!.low : f.low;
    const low = Math.max(kept, this.acceptedSinceFirstRefusal(f.burst));
    this.fit = { rate: Math.max(f.rate, low), burst: f.burst, low, high: Math.max(f.high, low) };
    this.trimLog();
    if (endedPhase === "hold") this.margin = Math.min(HOLD_MARGIN_MAX, this.margin * HOLD_MARGIN_GROWTH);
    // A verify costs a 429 at its end: not while 429s are already near the share we allow ourselves.
    const affordable = this.refusals.length <= VERIFY_FREE_EPISODES || (this.refused + 1) / (this.sends + 1) <= VERIFY_429_SHARE;
    if (!this.windowed && f.high >= UNBOUNDED_RATE) {
      // Nothing has bounded the rate from above yet (the 429 came from a burst, not a rate): ramp on from what passed.
      this.setRate(Math.max(this.fit.low, this.setting.rate ?? 0, MIN_RATE), "ramp", Math.max(1, this.fit.burst / 2), now);
    } else if (this.windowed || !affordable || this.fit.high / this.fit.low - 1 <= HOLD_SPREAD || endedPhase === "hold") this.hold(now);
    else this.verify(this.verifyRate(this.fit), now);
  }

  /**
   * Just below the fit: by the margin, and never above its low end. Against a window the fit's
   * rate is its allowance over its length. A large allowance is sent as each window opens (its
   * one 429 at the window's end is a small share of it, and the last window's requests go at
   * once instead of spread over it); a small one is spread over the window, which draws no 429.
   */
  private hold(now: number): void {
    const f = this.fit!;
    const rate = this.windowed ? f.rate * (1 - this.margin) : Math.min(f.low, f.rate * (1 - this.margin));
    const burst = this.windowed && f.burst * VERIFY_429_SHARE < 1 ? 1 : f.burst;
    this.setRate(rate, "hold", burst, now);
  }

  private verify(rate: number, now: number): void {
    this.setRate(rate, "verify", this.fit!.burst, now);
  }

  /**
   * While the fit allows a wide range of rates, the middle of it (in ratio): a 429 or its
   * absence halves the range. Once narrow, above the fitted rate by enough that the server's
   * bucket drains in about VERIFY_DRAIN_S (a longer drain measures the rate more closely), at
   * least VERIFY_OVER_MIN above, and not past the top of the range.
   */
  private verifyRate(f: Fit): number {
    if (f.high / f.low > VERIFY_BISECT_SPAN) return Math.max(f.rate * (1 + VERIFY_OVER_MIN), Math.sqrt(f.low * f.high));
    const over = Math.min(VERIFY_OVER_MAX, Math.max(VERIFY_OVER_MIN, f.burst / (f.rate * VERIFY_DRAIN_S)));
    return Math.max(f.rate * (1 + VERIFY_OVER_MIN), Math.min(f.high, f.rate * (1 + over)));
  }

  /**
   * The bucket fit. Whether a 503 cost a token depends on where the server put its check: with
   * three segments or more the data can tell, and the cost that leaves the least squares wins;
   * before that, half a token (wrong by at most half the 503s either way).
   */
  private bucketFit(segments: Segment[]): ReturnType<typeof fitBucket> {
    const any503 = segments.some((s) => s.uncertain?.length);
    if (!any503 || segments.filter((s) => !s.fromFull).length < 3) return fitBucket(segments, edgeNoise, 0.5);
    const fits = [0, 0.5, 1].map((share) => fitBucket(segments, edgeNoise, share));
    return fits.reduce((a, b) => (b.sse < a.sse ? b : a));
  }

  /**
   * A window's allowance over its length: what passed between the last two refusals, over the
   * time between the window ends they named (each a whole window, or several, apart).
   */
  private windowFit(): (ReturnType<typeof fitBucket>) | null {
    const n = this.refusals.length;
    const d1 = this.deadlines[n - 2];
    const d2 = this.deadlines[n - 1];
    if (n < 2 || d1 == null || d2 == null || !(d2 > d1)) return null;
    const seg = this.segmentOf(this.refusals[n - 2]!, this.refusals[n - 1]!, false);
    const rate = Math.max(MIN_RATE, seg.consumed.length / ((d2 - d1) / 1000));
    return { rate, burst: Math.max(1, seg.consumed.length), measuredS: (d2 - d1) / 1000, low: rate, high: rate, sse: 0 };
  }

  /** Requests per second the server accepted since the first 429, less one burst: a floor under any fit. */
  private acceptedSinceFirstRefusal(burst: number): number {
    const first = this.refusals[0];
    const last = this.refusals.at(-1);
    if (!first || !last || last.at - first.at < 1_000) return 0;
    const consumed = this.log.filter((e) => e.seq >= first.seq && e.seq < last.seq && e.outcome === "consumed").length;
    // The log may have been trimmed past the first refusal: then this undercounts, which only lowers the floor.
    return Math.max(0, (consumed - burst) / ((last.at - first.at) / 1000));
  }

  /** The run's first segment and the recent ones, each ending at a refusal. */
  private segments(): Segment[] {
    const out: Segment[] = this.initial ? [this.initial] : [];
    const n = this.refusals.length;
    for (let i = Math.max(1, n - FIT_SEGMENTS); i < n; i++) {
      const seg = this.segmentOf(this.refusals[i - 1]!, this.refusals[i]!, false);
      if (seg.consumed.length || seg.endAt > seg.startAt) out.push(seg);
    }
    return out;
  }

  /** The segment from `from` (a refusal, or the first send) to the refusal `to`. */
  /**
   * The segment from `from` (a refusal, or the first send) to the refusal `to`: the sends from
   * the one `from` names (a refusal's names the first send after its episode) up to `to`'s. It
   * ends at the refusal's send time, or at the last of its consumed sends if one went later (in
   * flight as the 429 came back).
   */
  private segmentOf(from: { seq: number; at: number } | null, to: Refusal, fromFull: boolean): Segment {
    const start = from ?? to;
    const consumed: number[] = [];
    const uncertain: number[] = [];
    for (const e of this.log) {
      if (e.seq >= to.seq) break;
      if (e.seq < start.seq) continue;
      if (e.outcome === "consumed") consumed.push(e.at);
      else if (e.outcome === "uncertain") uncertain.push(e.at);
    }
    const endAt = Math.max(to.at, consumed.at(-1) ?? -Infinity, uncertain.at(-1) ?? -Infinity);
    return { startAt: start.at, fromFull, consumed, uncertain, endAt };
  }

  /** Forget sends before the oldest segment the fit still uses. */
  private trimLog(): void {
    const keepFrom = this.refusals[Math.max(0, this.refusals.length - FIT_SEGMENTS - 1)];
    if (!keepFrom) return;
    const i = this.log.findIndex((e) => e.seq >= keepFrom.seq);
    if (i > 0) this.log = this.log.slice(i);
  }

  /** The oldest unanswered send at `sentAt` (sends granted in the same millisecond are alike). */
  private pendingAt(sentAt: number): LoggedSend | undefined {
    let lo = 0;
    let hi = this.log.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.log[mid]!.at < sentAt) lo = mid + 1;
      else hi = mid;
    }
    for (let i = lo; i < this.log.length && this.log[i]!.at === sentAt; i++) if (this.log[i]!.outcome === "pending") return this.log[i];
    return undefined;
  }

  private countPendingBeforeRefusal(): void {
    const last = this.refusals.at(-1);
    this.pendingBeforeRefusal = last ? this.log.filter((e) => e.seq < last.seq && e.outcome === "pending").length : 0;
  }

  private setRate(rate: number, phase: RatePhase, fittedBurst: number, now: number): void {
    const r = Math.max(MIN_RATE, rate);
    // In verify the drain is the measurement: no refill used at once. Elsewhere the refill, but
    // for a reserve that covers requests bunched by a busy machine.
    const reserve = 1 + (r * RESERVE_MS) / 1000;
    const burst = phase === "verify" ? 1 : Math.max(1, Math.floor(fittedBurst - reserve));
    const carry = fittedBurst >= 2 && r >= CARRY_FROM_RATE ? PACER_CARRY : 0;
    this.setting = { rate: r, burst, carry, phase };
    this.phaseAt = now;
    this.sendsAtPhase = this.sends;
    this.stepAt = now;
    this.sendsAtStep = this.sends;
  }
}
