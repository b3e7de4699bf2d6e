/**
 * The server's own stalls: a busy event loop or a garbage collection holds what arrives and
 * decides it all at once when it ends. Now and then (exponential gaps of `everyMs` on average,
 * seeded) the server decides nothing for up to `ms`; a request arriving meanwhile is decided
 * (its quota token taken) at the stall's end, with every other that arrived in it. A client
 * that counted those requests' tokens when it sent them, and refilled through the stall, finds
 * the bucket that batch just spent (docs/server-variance.md row 28). The quota harness
 * (test/scheduler/quota-harness.ts) uses the same model in virtual time.
 */
import { ConfigError } from "../core/errors.js";

export interface StallOptions {
  /** Mean gap between stalls (ms), exponential. */
  everyMs: number;
  /** Longest stall (ms); each lasts uniformly up to this. */
  ms: number;
}

export class ServerStalls {
  /** The next (or current) stall, as [start, end). */
  private ahead = { start: Infinity, end: -Infinity };

  /** `random`: uniform in [0, 1), seeded by the caller. */
  constructor(
    private readonly opts: StallOptions,
    private readonly random: () => number,
    now: number,
  ) {
    if (!(opts.everyMs > 0) || !Number.isFinite(opts.everyMs) || !(opts.ms >= 0) || !Number.isFinite(opts.ms)) {
      throw new ConfigError(`stalls need a mean gap above 0 ms and a length of 0 ms or more, got ${JSON.stringify(opts)}`);
    }
    this.next(now);
  }

  /** When a request arriving at `t` is decided: at `t`, or at the end of the stall in course. Times only move forward. */
  decidedAt(t: number): number {
    while (this.ahead.end <= t) this.next(this.ahead.end);
    return this.ahead.start <= t ? this.ahead.end : t;
  }

  /** The stall after `after`: an exponential gap of `everyMs` on average, lasting up to `ms`. */
  private next(after: number): void {
    const start = after + -Math.log(1 - this.random()) * this.opts.everyMs;
    this.ahead = { start, end: start + this.random() * this.opts.ms };
  }
}
