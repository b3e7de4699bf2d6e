/**
 * The workspace quota (a token bucket, a fixed window or a sliding window) and the ledger that checks clients
 * honour Retry-After. Both run on the wall clock, not the model's clock: they are about real
 * request timing.
 */
import { ISO_MOMENT_RE } from "../core/api-schemas.js";
import type { EndpointName } from "../core/defaults.js";
import { createRng } from "./prng.js";

/**
 * How a quota 429 names its wait: `seconds` (delta-seconds, an integer rounded up: the
 * default), `seconds-floor` (delta-seconds cut down, as a server that writes Math.floor does: "0" for
 * any wait under a second, a token bucket's next token), `seconds-round` (to the nearest second, as
 * Math.round does: 0 under half a second, up to half a second early above), `date` (an HTTP-date, 1 s granularity, rounded up), `date-floor` (an HTTP-date of the
 * moment cut to its second, as `new Date(ms).toUTCString()` writes it: up to a second before the
 * quota admits again), `date-iso` (the moment as ISO 8601, `toISOString()`, to the millisecond: outside
 * RFC 9110, but what a server that writes dates the JavaScript way sends) or `none` (no Retry-After).
 */
export const RETRY_AFTER_FORMS = ["seconds", "seconds-floor", "seconds-round", "date", "date-floor", "date-iso", "none"] as const;
export type RetryAfterForm = (typeof RETRY_AFTER_FORMS)[number];

export interface TokenBucketOptions {
  kind?: "token-bucket";
  requestsPerSecond: number;
  /** Bucket size; default max(1, requestsPerSecond). */
  burst?: number;
  /**
   * Tokens the bucket holds when the first request after the quota was set arrives (default: the
   * burst, full). Fewer: a quota another client of the workspace, or the run before, just used.
   */
  startTokens?: number;
  retryAfter?: RetryAfterForm;
  /**
   * Tokens one request of an endpoint takes (default 1 each): a quota that counts cost, not requests (a history
   * page the server finds dearer, say). A request whose cost the bucket cannot cover is refused until it can.
   */
  costs?: Partial<Record<EndpointName, number>>;
}

/**
 * At most `maxInFlight` requests being answered at once (from the quota's decision to the response's end); one
 * more is refused with a wait of `retryAfterMs` (default 1 s): a limit on concurrency, not on rate.
 */
export interface ConcurrencyOptions {
  maxInFlight: number;
  retryAfterMs?: number;
  retryAfter?: RetryAfterForm;
}

export interface FixedWindowOptions {
  kind: "fixed-window";
  /** Requests admitted per window. */
  requests: number;
  /** Window length; windows are aligned to the moment the quota was set. */
  windowSeconds: number;
  retryAfter?: RetryAfterForm;
}

export interface SlidingWindowOptions {
  kind: "sliding-window";
  /** Requests admitted in any span of `windowSeconds` (a log of admissions, as a Redis sorted set keeps it). */
  requests: number;
  windowSeconds: number;
  retryAfter?: RetryAfterForm;
}

/**
 * Another client of the workspace spends the same quota at this many requests per second (Poisson
 * arrivals, seeded): the application the mirror runs beside, say. It neither retries nor waits out a
 * Retry-After; its requests only take from the quota (SharedQuota).
 */
export interface OtherClientOption {
  otherClientRps?: number;
}

export type QuotaOptions = (TokenBucketOptions | FixedWindowOptions | SlidingWindowOptions) & OtherClientOption;

/** A refusal says how long until a request would be admitted: exactly (ms) and as Retry-After delta-seconds (≥ 1, rounded up). */
export type TakeResult = { ok: true } | { ok: false; retryAfterSeconds: number; waitMs: number };

export interface Quota {
  /** Admit one request of `endpoint` (absent: one of cost 1), or say when it would be. */
  take(endpoint?: EndpointName): TakeResult;
  /** An admitted request's response ended (a concurrency limit frees its place; the others count nothing). */
  release?(): void;
}

function refusal(waitMs: number): TakeResult {
  return { ok: false, waitMs, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
}

export class TokenBucket implements Quota {
  readonly rate: number;
  readonly capacity: number;
  private tokens: number;
  private last: number;
  private startAtFirstTake: boolean;
  private readonly costs: Partial<Record<EndpointName, number>>;

  constructor(
    opts: TokenBucketOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    if (!(opts.requestsPerSecond > 0) || !Number.isFinite(opts.requestsPerSecond)) {
      throw new RangeError(`requestsPerSecond must be a positive number, got ${opts.requestsPerSecond}`);
    }
    const burst = opts.burst ?? Math.max(1, opts.requestsPerSecond);
    if (!(burst >= 1) || !Number.isFinite(burst)) throw new RangeError(`burst must be >= 1, got ${opts.burst}`);
    const start = opts.startTokens ?? burst;
    if (!(start >= 0 && start <= burst)) throw new RangeError(`startTokens must be between 0 and the burst (${burst}), got ${opts.startTokens}`);
    this.rate = opts.requestsPerSecond;
    this.capacity = burst;
    this.tokens = start;
    this.last = clock();
    this.startAtFirstTake = opts.startTokens !== undefined;
    this.costs = { ...opts.costs };
    for (const [endpoint, cost] of Object.entries(this.costs)) {
      if (!(cost >= 1 && cost <= burst) || !Number.isFinite(cost)) throw new RangeError(`costs.${endpoint} must be between 1 and the burst (${burst}), got ${cost}`);
    }
  }

  /** Take the endpoint's tokens (one unless `costs` says otherwise), or say when they will be available. */
  take(endpoint?: EndpointName): TakeResult {
    const cost = (endpoint !== undefined ? this.costs[endpoint] : undefined) ?? 1;
    const now = this.clock();
    if (this.startAtFirstTake) {
      // The start level holds at the first request, whenever it comes (a client's start-up refills nothing).
      this.startAtFirstTake = false;
      this.last = now;
    }
    this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
    if (this.tokens >= cost) {
      this.tokens -= cost;
      return { ok: true };
    }
    return refusal(((cost - this.tokens) / this.rate) * 1000);
  }
}

/** ConcurrencyOptions (the server's option `concurrencyLimit`, beside any quota): requests being answered, counted from admission to their response's end (release). */
export class ConcurrencyLimit implements Quota {
  readonly maxInFlight: number;
  private readonly waitMs: number;
  private inFlight = 0;

  constructor(opts: ConcurrencyOptions) {
    if (!(opts.maxInFlight >= 1) || !Number.isInteger(opts.maxInFlight)) throw new RangeError(`maxInFlight must be a whole number >= 1, got ${opts.maxInFlight}`);
    const waitMs = opts.retryAfterMs ?? 1_000;
    if (!(waitMs > 0) || !Number.isFinite(waitMs)) throw new RangeError(`retryAfterMs must be a positive number, got ${opts.retryAfterMs}`);
    this.maxInFlight = opts.maxInFlight;
    this.waitMs = waitMs;
  }

  take(): TakeResult {
    if (this.inFlight >= this.maxInFlight) return refusal(this.waitMs);
    this.inFlight++;
    return { ok: true };
  }

  release(): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
  }
}

/** A window quota's allowance and length, checked (RangeError on bad values). */
function windowShape(opts: { requests: number; windowSeconds: number }): { limit: number; windowMs: number } {
  if (!(opts.requests >= 1) || !Number.isInteger(opts.requests)) throw new RangeError(`requests must be a whole number >= 1, got ${opts.requests}`);
  if (!(opts.windowSeconds > 0) || !Number.isFinite(opts.windowSeconds)) throw new RangeError(`windowSeconds must be a positive number, got ${opts.windowSeconds}`);
  return { limit: opts.requests, windowMs: opts.windowSeconds * 1000 };
}

/** N requests per window of W seconds; a refusal points at the end of the current window. */
export class FixedWindow implements Quota {
  readonly limit: number;
  readonly windowMs: number;
  private readonly start: number;
  private window = 0;
  private used = 0;

  constructor(
    opts: FixedWindowOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    ({ limit: this.limit, windowMs: this.windowMs } = windowShape(opts));
    this.start = clock();
  }

  take(): TakeResult {
    const elapsed = Math.max(0, this.clock() - this.start);
    const window = Math.floor(elapsed / this.windowMs);
    if (window !== this.window) {
      this.window = window;
      this.used = 0;
    }
    if (this.used < this.limit) {
      this.used++;
      return { ok: true };
    }
    return refusal((window + 1) * this.windowMs - elapsed);
  }
}

/** Entries that left a sliding window's log are dropped in bulk once this many have (one copy per that many requests, not one shift each). */
const LOG_COMPACT_AFTER = 1024;

/**
 * At most N requests admitted in any W seconds: a log of admission times, not aligned to any
 * clock. A refusal points at the moment the oldest admission in the log leaves it. Against a
 * client that sends each allowance at once it behaves as a fixed window that opens at the
 * first request; against one that spreads its requests, each admission frees its slot W later.
 */
export class SlidingWindow implements Quota {
  readonly limit: number;
  readonly windowMs: number;
  /** Admission times, oldest first, from `head` on (shifted in bulk, not per request). */
  private log: number[] = [];
  private head = 0;

  constructor(
    opts: SlidingWindowOptions,
    private readonly clock: () => number = () => performance.now(),
  ) {
    ({ limit: this.limit, windowMs: this.windowMs } = windowShape(opts));
  }

  take(): TakeResult {
    const now = this.clock();
    while (this.head < this.log.length && this.log[this.head]! <= now - this.windowMs) this.head++;
    if (this.head > LOG_COMPACT_AFTER) {
      this.log = this.log.slice(this.head);
      this.head = 0;
    }
    if (this.log.length - this.head < this.limit) {
      this.log.push(now);
      return { ok: true };
    }
    return refusal(this.log[this.head]! + this.windowMs - now);
  }
}

/** The quota an options object describes (throws RangeError on bad values). */
export function createQuota(opts: QuotaOptions, clock?: () => number): Quota {
  if (opts.otherClientRps !== undefined) {
    if (!(opts.otherClientRps > 0) || !Number.isFinite(opts.otherClientRps)) throw new RangeError(`otherClientRps must be a positive number, got ${JSON.stringify(opts.otherClientRps)}`);
    return new SharedQuota(opts, opts.otherClientRps, clock);
  }
  return createOwnQuota(opts, clock);
}

function createOwnQuota(opts: QuotaOptions, clock?: () => number): Quota {
  if (opts.retryAfter !== undefined && !RETRY_AFTER_FORMS.includes(opts.retryAfter)) {
    throw new RangeError(`retryAfter must be one of ${RETRY_AFTER_FORMS.join(", ")}, got ${JSON.stringify(opts.retryAfter)}`);
  }
  if (opts.kind === "fixed-window") return new FixedWindow(opts, clock);
  if (opts.kind === "sliding-window") return new SlidingWindow(opts, clock);
  if (opts.kind !== undefined && opts.kind !== "token-bucket") throw new RangeError(`kind must be token-bucket, fixed-window or sliding-window, got ${JSON.stringify(opts.kind)}`);
  return new TokenBucket(opts, clock);
}

/**
 * The Retry-After header value a quota refusal carries, decided at `nowMs` (epoch ms), or
 * null for none. The date form rounds the moment up to the next whole second (HTTP-dates
 * have no finer grain), so the date a client reads is never before the quota admits again
 * (`date-floor` cuts it down instead, as a server that formats without rounding does);
 * the ledger then holds clients to that date, parsed from the header as they parse it.
 */
export function quotaRetryAfter(form: RetryAfterForm | undefined, refused: { retryAfterSeconds: number; waitMs: number }, nowMs: number): string | null {
  switch (form ?? "seconds") {
    case "none":
      return null;
    case "date":
      return new Date(Math.ceil((nowMs + refused.waitMs) / 1000) * 1000).toUTCString();
    case "date-floor":
      // The moment, its milliseconds dropped: a server that formats its deadline without rounding.
      return new Date(nowMs + refused.waitMs).toUTCString();
    case "date-iso":
      return new Date(nowMs + Math.ceil(refused.waitMs)).toISOString();
    case "seconds-floor":
      return String(Math.floor(refused.waitMs / 1000));
    case "seconds-round":
      return String(Math.round(refused.waitMs / 1000));
    default:
      return String(refused.retryAfterSeconds);
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
 * HTTP-date. Unparsable values name none (they cannot be violated). `skewMs`: how far the
 * server's clock, which its dates are written in, reads ahead of the machine's (`sentAt`'s).
 */
export function retryAfterDeadline(value: string, sentAt: number, skewMs = 0): number | null {
  const v = value.trim();
  // Decimal seconds are outside RFC 9110's form, but a server that sends "2.5" means it (fault raw:2.5).
  if (/^\d+(\.\d+)?$/.test(v)) return sentAt + Number(v) * 1000;
  // Only something that looks like an HTTP-date (all three RFC 9110 forms start with a day
  // name): V8's Date.parse would otherwise read "-1" as a date in 2001.
  // An ISO 8601 moment with its zone (date-iso), outside the RFC but a moment all the same.
  if (ISO_MOMENT_RE.test(v)) return Date.parse(v) - skewMs;
  if (!/^(mon|tue|wed|thu|fri|sat|sun)/i.test(v)) return null;
  // asctime names no zone and means GMT; Date.parse would take it as local time.
  const asctime = /^[A-Za-z]{3} [A-Za-z]{3} [ \d]?\d \d{2}:\d{2}:\d{2} \d{4}$/.test(v);
  const date = Date.parse(asctime ? `${v} GMT` : v);
  return Number.isNaN(date) ? null : date - skewMs;
}

/**
 * A quota another client spends too (OtherClientOption). Its arrivals are replayed lazily, in time
 * order, before each of ours: the quota's state is what it would be had they come as they fell, with
 * no timer of its own, and the same seed gives the same arrivals.
 */
export class SharedQuota implements Quota {
  /** The other client's requests so far, and how many of them the quota refused. */
  otherRequests = 0;
  otherRefused = 0;
  private replayingAt: number | null = null;
  private nextOtherAt: number;
  private readonly inner: Quota;
  private readonly rng = createRng(0, "quota-other-client");

  constructor(
    opts: QuotaOptions,
    private readonly otherRps: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.inner = createOwnQuota(opts, () => this.replayingAt ?? this.clock());
    this.nextOtherAt = this.clock() + this.otherGapMs();
  }

  take(endpoint?: EndpointName): TakeResult {
    const now = this.clock();
    while (this.nextOtherAt <= now) {
      this.replayingAt = this.nextOtherAt;
      this.otherRequests++;
      if (!this.inner.take().ok) this.otherRefused++;
      this.nextOtherAt += this.otherGapMs();
    }
    this.replayingAt = null;
    return this.inner.take(endpoint);
  }

  /** Exponential, mean 1 ÷ the other client's rate. */
  private otherGapMs(): number {
    return (-Math.log(1 - this.rng.next()) / this.otherRps) * 1000;
  }
}
