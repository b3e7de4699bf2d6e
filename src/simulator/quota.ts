/**
 * The workspace quota (a token bucket) and the ledger that checks clients honour
 * Retry-After. Both run on the wall clock, not the model's clock: they are about real
 * request timing.
 */

export interface QuotaOptions {
  requestsPerSecond: number;
  /** Bucket size; default max(1, requestsPerSecond). */
  burst?: number;
}

export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number };

export class TokenBucket {
  readonly rate: number;
  readonly capacity: number;
  private tokens: number;
  private last: number;

  constructor(
    opts: QuotaOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    if (!(opts.requestsPerSecond > 0) || !Number.isFinite(opts.requestsPerSecond)) {
      throw new RangeError(`requestsPerSecond must be a positive number, got ${opts.requestsPerSecond}`);
    }
    const burst = opts.burst ?? Math.max(1, opts.requestsPerSecond);
    if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`burst must be >= 1, got ${opts.burst}`);
    this.rate = opts.requestsPerSecond;
    this.capacity = burst;
    this.tokens = burst;
    this.last = clock();
  }

  /** Take one token, or say in whole seconds (at least 1) when one will be available. */
  take(): TakeResult {
    const now = this.clock();
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - this.tokens) / this.rate)) };
  }
}

export interface RetryAfterViolation {
  /** Epoch ms the early request arrived. */
  at: number;
  path: string;
  /** How long before the Retry-After deadline it arrived. */
  earlyByMs: number;
}

/**
 * A request arriving on another connection this soon after a Retry-After response may have
 * been sent before the client saw that response (in flight, or delayed by a busy machine:
 * the arrival time is when this process got to it). On the connection that carried the
 * 429/503 itself there is no grace: without pipelining, the next request on that socket was
 * sent after the client had the whole response.
 */
export const RETRY_AFTER_GRACE_MS = 250;

/**
 * Remembers each 429/503 that carried a usable Retry-After (when it was sent, and the
 * deadline it named) and flags any later request that arrives after the grace period but
 * before a deadline. The quota is per workspace, so any request counts, whichever
 * connection or worker sent it.
 */
export class RetryAfterLedger {
  private windows: { sentAt: number; deadline: number; conn: object | null }[] = [];
  readonly violations: RetryAfterViolation[] = [];

  /** `conn` identifies the connection (socket) the response went out on, when known. */
  record(sentAt: number, deadline: number, conn: object | null = null): void {
    if (deadline > sentAt) this.windows.push({ sentAt, deadline, conn });
  }

  /** Check an arriving request; returns the violation it was recorded as, if any. */
  check(at: number, path: string, conn: object | null = null): RetryAfterViolation | null {
    this.windows = this.windows.filter((w) => w.deadline > at);
    let earlyBy = 0;
    for (const w of this.windows) {
      const sameConnection = conn !== null && w.conn === conn;
      if (sameConnection || at > w.sentAt + RETRY_AFTER_GRACE_MS) earlyBy = Math.max(earlyBy, w.deadline - at);
    }
    if (earlyBy <= 0) return null;
    const v = { at, path, earlyByMs: earlyBy };
    this.violations.push(v);
    return v;
  }

  clearViolations(): void {
    this.violations.length = 0;
  }
}

/**
 * The deadline a Retry-After value names, as a client would read it: delta-seconds or an
 * HTTP-date. Unparsable values name none (they cannot be violated).
 */
export function retryAfterDeadline(value: string, sentAt: number): number | null {
  const v = value.trim();
  if (/^\d+$/.test(v)) return sentAt + Number(v) * 1000;
  // Only something that looks like an HTTP-date (all three RFC 9110 forms start with a day
  // name): V8's Date.parse would otherwise read "-1" or "1.5" as dates in 2001.
  if (!/^(mon|tue|wed|thu|fri|sat|sun)/i.test(v)) return null;
  const date = Date.parse(v);
  return Number.isNaN(date) ? null : date;
}
