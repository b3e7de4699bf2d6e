/**
 * The send rate, from the quota fit (quota-estimator.ts). Three phases, after TCP's slow
 * start and congestion avoidance and the AWS SDK's adaptive mode:
 * - unpaced: until the first 429 we have no rate of our own (the in-flight limit applies);
 * - ramp: nothing bounds the rate from above yet (the first 429 came out of an unpaced
 *   burst), so we start from the rate the server accepted and double it every
 *   RAMP_STEP_MS. Its next 429 is what bounds the rate;
 * - fitted: the rate is bounded on both sides. We send between the bounds, so a 429
 *   (the rate is too high) or QUIET_MS without one (it is not) halves the gap, a bisection
 *   in which each step above the quota costs one pause; once the gap is within TIGHT_SPAN
 *   we send at its lower bound and stop probing.
 * The pacer's capacity follows the smallest capacity the fit allows, less one: the burst
 * the server refills during a pause is used at once, and never more than the server holds.
 */
import { FIT_PRECISION, type QuotaFit } from "./quota-estimator.js";

/** Within this span, send at the lower bound: the rest of the gap is worth less than a 429's pause. */
const TIGHT_SPAN = 1.03;
/** The ramp doubles its rate at most this often, and only after RAMP_STEP_SENDS requests at it. */
const RAMP_STEP_MS = 250;
const RAMP_STEP_SENDS = 2;
/** A rate sent at this long without a 429 is taken as within the quota (while probing)... */
const QUIET_MS = 2_000;
/** ...if at least this share of its requests really went out (not starved for work). */
const QUIET_SHARE = 0.8;
/** A 429 at a rate thought quiet: the quiet bound falls back to this share of it. */
const QUIET_RETRACT = 0.9;
/**
 * After a ramp's 429, this share of the rate that passed in the second before it is taken as
 * within the quota: that second also spent the bucket's burst, which a large bucket makes a
 * good part of it.
 */
const RAMP_LOW_SHARE = 0.8;
/** Bounds wider than this ratio say too little to bisect on: the ramp goes on (from the accepted rate) instead. */
const RAMP_UNTIL_SPAN = 8;
/** The share of a token a late timer may carry over (pacer.ts), when the server's bucket may hold two. */
const PACER_CARRY = 0.9;
/** Below this rate a millisecond is under 5% of a token interval: nothing worth the risk of a pair. */
const CARRY_FROM_RATE = 50;
/** Never below: one request every 2 s still makes progress and keeps learning. */
const MIN_RATE = 0.5;

/** What is known before any fit: nothing. */
const OPEN_FIT: QuotaFit = { low: 0, high: Infinity, burstLow: 1, burstHigh: Infinity };

export type RatePhase = "unpaced" | "ramp" | "fitted";

export interface RateSetting {
  rate: number | null;
  burst: number;
  /** The pacer may carry a fraction of a token above `burst` (the server's bucket holds more than one). */
  carry: number;
  phase: RatePhase;
}

export class RateControl {
  private setting: RateSetting = { rate: null, burst: 1, carry: 0, phase: "unpaced" };
  private fit: QuotaFit | null = null;
  private grownAt = 0;
  /** Probing bounds: the highest rate that ran quiet for QUIET_MS, the lowest that drew a 429. */
  private quietLow = 0;
  private throttledHigh = Infinity;
  private rateSetAt = 0;
  private sentSinceSet = 0;

  get current(): RateSetting {
    return this.setting;
  }

  /** A request went out at the current rate. */
  sent(): void {
    this.sentSinceSet++;
  }

  /**
   * A new fit (after a 429 episode, or a periodic refit). `accepted` is the rate the server
   * accepted over the last second (req/s): where a ramp starts. `newEpisode`: a 429 came
   * while sending at the current rate.
   */
  update(latest: QuotaFit | null, accepted: number, now: number, newEpisode: boolean): RateSetting {
    // No bucket explains what was seen (noisy timing, or not a bucket): the probe's own verdicts still hold.
    const fit = latest ? (this.fit ? narrowed(this.fit, latest) : latest) : (this.fit ?? OPEN_FIT);
    this.fit = fit;
    this.learnFromCurrentRate(fit, accepted, now, newEpisode);
    const burst = Math.max(1, fit.burstLow - 1);
    const carry = fit.burstHigh >= 2 && (this.setting.rate ?? Infinity) >= CARRY_FROM_RATE ? PACER_CARRY : 0;
    const low = Math.max(fit.low, this.quietLow);
    const high = Math.min(fit.high, this.throttledHigh);
    const span = high / low;
    if (Number.isFinite(high) && (Number.isFinite(this.throttledHigh) || high / Math.max(low, MIN_RATE) <= RAMP_UNTIL_SPAN || this.setting.phase === "fitted")) {
      // At the lower bound, less the fit's own precision: a bound off by that share, sent at
      // for minutes, drains a small bucket. Wide bounds are halved in ratio, narrow ones in difference.
      const mid = span > 2 ? Math.sqrt(low * high) : low + 0.5 * (high - low);
      const rate = span <= TIGHT_SPAN ? low * (1 - 2 * FIT_PRECISION) : mid;
      this.set({ rate: Math.max(MIN_RATE, rate), burst, carry, phase: "fitted" }, now);
    } else {
      // A 429 during the ramp: resume from half the rate that drew it (slow start's threshold).
      // A refit within the episode or a quiet one keeps the ramp where it is.
      const current = this.setting.phase === "ramp" ? this.setting.rate : null;
      const from = current === null ? accepted : newEpisode ? current / 2 : current;
      this.set({ rate: Math.min(high, Math.max(MIN_RATE, low, from)), burst, carry, phase: "ramp" }, now);
    }
    return this.setting;
  }

  /**
   * The probe's verdict on the rate in force: a 429 says it is too high; QUIET_MS of sending
   * at it (really sending: at least QUIET_SHARE of its requests went out) says it is not.
   * A 429 at or below a rate we had thought quiet means that verdict came too early (a big
   * bucket was still draining): it is taken back.
   */
  private learnFromCurrentRate(fit: QuotaFit, accepted: number, now: number, newEpisode: boolean): void {
    const rate = this.setting.rate;
    if (rate === null || this.setting.phase === "unpaced") return;
    if (newEpisode && this.setting.phase === "ramp") {
      // The ramp overshot: the quota lies between most of what passed and the rate that drew the 429.
      this.throttledHigh = Math.min(this.throttledHigh, rate);
      this.quietLow = Math.max(this.quietLow, Math.min(rate, accepted) * RAMP_LOW_SHARE);
      return;
    }
    if (newEpisode) {
      this.throttledHigh = Math.min(this.throttledHigh, rate);
      if (rate <= this.quietLow * (1 + 2 * FIT_PRECISION)) this.quietLow = Math.max(fit.low, rate * QUIET_RETRACT);
      return;
    }
    const elapsed = now - this.rateSetAt;
    if (this.setting.phase === "fitted" && elapsed >= QUIET_MS && this.sentSinceSet >= QUIET_SHARE * rate * (elapsed / 1000)) {
      this.quietLow = Math.max(this.quietLow, rate);
      if (this.quietLow > this.throttledHigh) this.throttledHigh = Infinity;
    }
  }

  private set(next: RateSetting, now: number): void {
    if (next.rate !== this.setting.rate || next.phase !== this.setting.phase) {
      this.rateSetAt = now;
      this.sentSinceSet = 0;
      this.grownAt = now;
    }
    this.setting = next;
  }

  /** Ramp growth, called as requests are granted; true when the rate changed. */
  tick(now: number): boolean {
    const s = this.setting;
    if (s.phase !== "ramp" || s.rate === null || !this.fit) return false;
    if (now - this.grownAt < Math.max(RAMP_STEP_MS, (RAMP_STEP_SENDS / s.rate) * 1000)) return false;
    const next = Math.min(this.fit.high, this.throttledHigh, s.rate * 2);
    this.grownAt = now;
    if (next <= s.rate) return false;
    this.set({ ...s, rate: next }, now);
    return true;
  }
}

/**
 * Bounds learned earlier still hold (observations age out of the estimator, the quota does
 * not), so a new fit narrows the old one; a new fit that contradicts it means the quota
 * changed, and replaces it.
 */
function narrowed(prev: QuotaFit, next: QuotaFit): QuotaFit {
  const out: QuotaFit = {
    low: Math.max(prev.low, next.low),
    high: Math.min(prev.high, next.high),
    burstLow: Math.max(prev.burstLow, next.burstLow),
    burstHigh: Math.min(prev.burstHigh, next.burstHigh),
  };
  const consistent = out.low <= out.high * (1 + 2 * FIT_PRECISION) && out.burstLow <= out.burstHigh;
  return consistent ? out : next;
}
