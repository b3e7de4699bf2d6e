/**
 * What the run's answers showed about a server limit on requests in flight (a limit on concurrency, not
 * on rate): the document's "limit applied before authentication" may be one, and a gateway's often is.
 * Such a limit refuses a request only while `n` of ours are being served, whatever the rate; the rate
 * control reads its 429s as a token bucket's and holds the rate at which in-flight peaks stay rare: 4 in
 * flight, served in 50-150 ms, allow 40 req/s one after another, and a paced run held 26 (the harness
 * 1.67-1.89x the least time, a server written apart from ours 1.75x).
 *
 * Each request is counted with the number of ours awaiting an answer's status when it went (`k`; a refusal's
 * also counts the requests sent with it in one wave, which may reach the server first). A server serving at
 * most `n` refuses only requests sent with `n` or more of ours awaiting (it serves no more than we have sent),
 * so a limit on in flight shows as refusals at `k` ≥ n and none below, with many passes just below and few
 * at or above. A token bucket's 429s fall at whatever `k` the rate gives, passes beside them; its first wave
 * and a ramp draw them at their most in flight too, so a limit is only taken while the rate control probes,
 * holds or is contested (`mayFind`: the scheduler's part). The limit found is then the ceiling on requests in
 * flight, sent unpaced: under it such a server refuses nothing, so a 429 of a request sent under it refutes it
 * for the run, and the rate control, which saw every 429 before (not that one: it came at a rate the control
 * never set), takes over again.
 *
 * Not found: a limit whose `k` our requests on the way blur (a server 20 ms away serving in 100 ms: passes
 * at `k` ≥ n as often as refusals), nor one of 2 read first as a bucket of one token, which is sent one
 * request at a time (no pass at `k` = 1 to show the level below safe). A server that frees a place only after
 * its answer has left can refuse at `k` = n − 1 now and then: that finds nothing, or refutes the limit found.
 */

/** A limit on in flight is at least this: with one, every request is alone and the rate control's spacing from answers serves it. */
const MIN_LIMIT = 2;
/** Passes sent with one fewer in flight than the limit before it is taken (the level below it proved safe, not met once in a ramp). */
const MIN_PASSES_BELOW = 10;
/** Refusals at or above the limit before it is taken. */
const MIN_REFUSALS = 3;
/**
 * At or above the limit, refusals at least this share of the passes: such a server refuses nearly every request
 * sent while it serves `n` (a pass there is one whose place freed while its status was on the way back);
 * a token bucket passes most requests at any `k`.
 */
const MIN_REFUSED_SHARE = 1;

export type InFlightVerdict = "found" | "refuted" | null;

export class InFlightEvidence {
  private readonly passes: number[] = [];
  private readonly refusals: number[] = [];
  private refuted = false;
  /** The limit found and in force (null: none). */
  limit: number | null = null;

  /** A request sent with `k` others awaiting their status passed: whether that completes the evidence for a limit. */
  passed(k: number, mayFind = true): InFlightVerdict {
    this.passes[k] = (this.passes[k] ?? 0) + 1;
    if (!mayFind || this.refuted || this.limit !== null || k !== this.lowestRefused() - 1) return null;
    return this.find();
  }

  /**
   * A request sent with `k` others awaiting their status was refused (429): whether a limit was found, or the one in
   * force refuted (by a request sent under it: one sent before it was found was sent without it).
   */
  refused(k: number, mayFind = true, sentUnderLimit = true): InFlightVerdict {
    if (this.refuted) return null;
    this.refusals[k] = (this.refusals[k] ?? 0) + 1;
    if (this.limit !== null) {
      if (!sentUnderLimit) return null;
      // Under the limit in force such a server refuses nothing.
      this.limit = null;
      this.refuted = true;
      return "refuted";
    }
    return mayFind ? this.find() : null;
  }

  /** The fewest in flight any refusal went with (-1: none yet). */
  private lowestRefused(): number {
    return this.refusals.findIndex((r) => (r ?? 0) > 0);
  }

  private find(): InFlightVerdict {
    const n = this.lowestRefused();
    if (!this.fits(n)) return null;
    this.limit = n;
    return "found";
  }

  /** Every refusal at `n` in flight or more, none below, the level below well passed, and refusals common at and above it. */
  private fits(n: number): boolean {
    if (n < MIN_LIMIT || (this.passes[n - 1] ?? 0) < MIN_PASSES_BELOW) return false;
    let refused = 0;
    let passed = 0;
    for (let k = n; k < Math.max(this.refusals.length, this.passes.length); k++) {
      refused += this.refusals[k] ?? 0;
      passed += this.passes[k] ?? 0;
    }
    return refused >= MIN_REFUSALS && refused >= MIN_REFUSED_SHARE * passed;
  }

  /** Passes and refusals by `k` (for the journal and tests). */
  get counts(): { passes: number[]; refusals: number[] } {
    return { passes: [...this.passes].map((x) => x ?? 0), refusals: [...this.refusals].map((x) => x ?? 0) };
  }
}
