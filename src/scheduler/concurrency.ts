/**
 * How many requests may be in flight, by Little's law: to send `rate` requests per second
 * when each takes `latency` seconds, rate × latency must be in flight. Loopback needs 1 or 2;
 * a server 100 ms away at 100 req/s needs 10. The limit follows the measured latency (the
 * median of recent round trips) between a floor and the configured ceiling (`concurrency`).
 * With no send rate of our own yet (no 429 seen), it sizes for UNPACED_RPS: on loopback that is
 * the floor (4 in flight at 2 ms is 2,000 req/s), 100 ms away it is 22. It gets there by slow
 * start, one more per request that passed (doubling each round trip), because every request in
 * flight when the bucket runs dry is a 429: 200 ms away with a ceiling of 64, the first wave
 * of 62 drew 42 429s from a bucket of 20, and a 5 req/s bucket without burst drew 59 429s in a
 * run of 185 requests (7 with slow start). Slow start alone, without the UNPACED_RPS sizing,
 * would grow on loopback too (there throughput × latency is the in-flight count itself).
 * Unpaced, without HEADROOM: what is in flight beyond the quota's share of a round trip when
 * the bucket runs dry comes back 429: 100 ms away a 100/s bucket of 100 refused 19 of its first
 * wave with the headroom, 11 without (harness), and 200 req/s still has 22 in flight for its 20.
 */

/** Headroom over rate × latency: latency varies, and a burst after a pause wants more at once. */
const HEADROOM = 1.5;
const EXTRA = 2;
/** Round trips remembered for the median. */
const SAMPLES = 32;
/**
 * The rate sized for before any quota is known: the fastest quota (200 req/s) we expect. Every
 * request in flight when the bucket runs dry is a 429, and the first round trips (a cold
 * process) are the slowest, so this stays modest: 5 in flight at 10 ms.
 */
export const UNPACED_RPS = 200;

export class ConcurrencyLimit {
  private readonly rtts: number[] = [];
  /** Requests that passed the quota so far: unpaced, the limit grows by one per pass (slow start). */
  private passes = 0;

  constructor(
    private readonly floor: number,
    readonly ceiling: number,
  ) {}

  answer(sentAt: number, answeredAt: number): void {
    this.rtts.push(Math.max(0, answeredAt - sentAt));
    if (this.rtts.length > SAMPLES) this.rtts.shift();
  }

  /** A request passed the quota. */
  passed(): void {
    this.passes++;
  }

  /** Median round trip in ms (0 before the first answer). */
  get latencyMs(): number {
    if (!this.rtts.length) return 0;
    const s = [...this.rtts].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)]!;
  }

  /** How far recent round trips spread (ms): the longest less the shortest (a busy machine's stalls included). */
  get spreadMs(): number {
    if (!this.rtts.length) return 0;
    return Math.max(...this.rtts) - Math.min(...this.rtts);
  }

  /** Round trips measured so far (the recent ones kept count up to SAMPLES). */
  get samples(): number {
    return this.rtts.length;
  }

  /** The shortest recent round trip (ms): the distance to the server, without the stalls of a busy process. */
  get shortestMs(): number {
    return this.rtts.length ? Math.min(...this.rtts) : 0;
  }

  /**
   * The in-flight limit for sending at `rate` req/s (null: unpaced). Unpaced, it sizes by the
   * shortest round trip: a cold process's first answers are slow for reasons of its own, and
   * every request in flight when the bucket runs dry comes back 429.
   */
  limit(rate: number | null): number {
    const latencyS = (rate === null ? this.shortestMs : this.latencyMs) / 1000;
    const target = rate ?? UNPACED_RPS;
    let want = Math.ceil(target * latencyS * (rate === null ? 1 : HEADROOM)) + EXTRA;
    if (rate === null) want = Math.min(want, this.floor + this.passes);
    return Math.max(Math.min(this.floor, this.ceiling), Math.min(this.ceiling, want));
  }
}
