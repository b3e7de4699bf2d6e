/**
 * Our own token bucket in front of the server's: a conservative copy of the quota we
 * fitted (rate and capacity at or below the server's), so a request it lets through finds
 * a token at the server too. After a 429 it is emptied, like the server's; it refills during
 * every pause at its own rate, so the burst the server refilled in a Retry-After pause is
 * used at once instead of being wasted.
 */
export class Pacer {
  private tokens = 0;
  /**
   * How much of a token may be kept above the capacity. Timers fire in whole milliseconds
   * and late: at 110 req/s a grant each ceil(9.1) = 10 ms is 100 req/s. Carrying the fraction
   * a late timer earned keeps the average rate, at the cost of two grants closer than one
   * token interval now and then, which only a server whose bucket holds one token would refuse.
   */
  private carry = 0;
  private last: number;

  constructor(
    private rate: number,
    private cap: number,
    now: number,
    carry = 0,
  ) {
    this.last = now;
    this.carry = carry;
  }

  get requestsPerSecond(): number {
    return this.rate;
  }

  configure(rate: number, cap: number, now: number, carry = 0): void {
    this.refill(now);
    this.rate = rate;
    this.cap = Math.max(1, cap);
    this.carry = carry;
    this.tokens = Math.min(this.tokens, this.cap + this.carry);
  }

  /** True when a request may go now. */
  ready(now: number): boolean {
    this.refill(now);
    return this.tokens >= 1 - 1e-9;
  }

  /** When the next token is due (epoch ms). */
  nextTokenAt(now: number): number {
    this.refill(now);
    // Whole milliseconds, at least one: clocks tick in ms, and a wait below a float ulp never ends.
    return now + Math.max(1, Math.ceil(((1 - this.tokens) / this.rate) * 1000));
  }

  take(now: number): void {
    this.refill(now);
    this.tokens = Math.max(0, this.tokens - 1);
  }

  /**
   * The server's bucket holds at least `n` (it refilled through a pause no 429 asked for): that many may
   * go now, at this instant. Above the capacity, what is not granted before time moves on is cut back to
   * it by the next refill (the bucket's proof was for this moment, not a store to spend later).
   */
  atLeast(n: number, now: number): void {
    this.refill(now);
    this.tokens = Math.max(this.tokens, n);
  }

  /**
   * The server decided a request we counted at its send only now (its answer came late: held in the
   * server's stall): its token is taken again, at this moment (decidedLate in scheduler.ts).
   */
  takeAgain(now: number): void {
    this.refill(now);
    this.tokens = Math.max(0, this.tokens - 1);
  }

  /** The server's bucket is empty (it answered 429). */
  empty(now: number): void {
    this.refill(now);
    this.tokens = 0;
  }

  private refill(now: number): void {
    if (now > this.last) this.tokens = Math.min(this.cap + this.carry, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = Math.max(this.last, now);
  }
}
